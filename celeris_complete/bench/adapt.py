"""The lift of adapting the model to a repository: bench repo's packages, adapted on 80%, measured on 20%.

Per package (``bench_repo.PACKAGES``, fetched as bench repo fetches them):

- The package's ``.py`` files are split by a seeded hash of their path: in hash order, files with room
  for sites (``bench_repo.MIN_FILE_LINES``) are held out until they make ``HELD_OUT_SHARE`` of the files
  (at least one); all others are the adaptation's workspace.  Smaller files are never held out, so a
  small package still has a file to measure on.  A package of fewer than ``MIN_FILES`` files (tabulate is
  one module) is first cut into parts of about ``PART_LINES`` lines at top-level ``def``/``class``
  boundaries, each part a file of its own (``name.partNN.py``), and the parts are split instead.
- A copy of the base model is adapted on the workspace with ``celeris-complete adapt --fresh`` in a child
  process (its own code path: snapshot under the user's cache, low priority, the short-run schedule, and
  its check on the files it held out itself, reported as ``adapt.check``).  The workspace lives in the
  cache too (``bench-adapt/``), so its adapted model has a stable place; ``keep_adapted`` reuses one that
  finished (its check written) instead of training again.
- Sites are chosen in the held-out files with bench repo's site choice, and both models answer the same
  sites through the real language server (one server per model and drafts setting), whose workspace is
  the adaptation's workspace: no held-out file is on disk while it runs.  Drafts on (the default) and,
  with ``drafts_off``, off.  The base and the adapted model run alternately, so a change of load on the
  machine falls on both; the decoding settings both servers reported are compared (``same_decoding``).

The lift is adapted minus base, in exact match and edit similarity, per package and over all sites,
with a 95% interval for the edit similarity's (a paired bootstrap over the sites: both models answer
the same sites, so the per-site differences are resampled): an interval above 0 is a lift that the
choice of sites does not explain.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from celeris_complete.bench.repo import (
    MIN_FILE_LINES,
    PACKAGES,
    _serve_sites,
    choose_sites,
    cursor_columns,
    summarize,
)
from celeris_complete.bench.repo_languages import cache_dir as bench_repo_cache
from celeris_complete.bench.repo_languages import fetch_package, python_files
from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import default_model_dir
from celeris_complete.training.adapt import CHECK_FILE, LR, REPLAY, adapt_dir

HELD_OUT_SHARE = 0.2
MIN_FILES = 5  # fewer files than this: cut into parts first
PART_LINES = 200
MODELS = ("base", "adapted")


# ---- the split ------------------------------------------------------------------------------
def _boundaries(lines: Sequence[str]) -> list[int]:
    """Lines where a top-level definition (with its decorators) starts."""
    starts = []
    for i, line in enumerate(lines):
        head = line.startswith(("def ", "async def ", "class ", "@"))
        if i and head and not lines[i - 1].startswith("@"):
            starts.append(i)
    return starts


def cut_into_parts(files: Mapping[str, str], part_lines: int = PART_LINES) -> dict[str, str]:
    """Each file cut at top-level definitions into parts of at least ``part_lines`` lines (the last
    may be shorter): ``dir/name.py`` -> ``dir/name.part01.py``, ... (a file too short stays whole)."""
    out = {}
    for name, text in files.items():
        lines = text.split("\n")
        cuts, last = [0], 0
        for start in _boundaries(lines):
            if start - last >= part_lines and len(lines) - start >= part_lines // 2:
                cuts.append(start)
                last = start
        if len(cuts) == 1:
            out[name] = text
            continue
        stem = name.removesuffix(".py")
        for k, (a, b) in enumerate(zip(cuts, [*cuts[1:], len(lines)]), 1):
            out[f"{stem}.part{k:02d}.py"] = "\n".join(lines[a:b])
    return out


def _hash(name: str, seed: int | str) -> str:
    return hashlib.sha256(f"bench-adapt:{seed}:{name}".encode()).hexdigest()


def _has_room(text: str) -> bool:
    return sum(bool(mids) for _, mids in map(cursor_columns, text.split("\n"))) >= MIN_FILE_LINES


def split_files(files: Mapping[str, str], seed: int | str = 0) -> tuple[list[str], list[str]]:
    """(adaptation workspace, held out): see the module doc.  Deterministic for a seed."""
    wanted = max(1, round(HELD_OUT_SHARE * len(files)))
    order = sorted(files, key=lambda name: _hash(name, seed))
    held = sorted([name for name in order if _has_room(files[name])][:wanted])
    return sorted(set(files) - set(held)), held


def write_files(folder: Path, files: Mapping[str, str], names: Sequence[str]) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[name], encoding="utf-8")


# ---- adapting -------------------------------------------------------------------------------
def stage_dir(name: str, version: str, seed: int) -> Path:
    """Where a package's adaptation workspace is written (its adapted model: ``adapt_dir`` of it)."""
    return bench_repo_cache().parent / "bench-adapt" / f"{name}-{version}-seed{seed}"


def run_adapt(
    workspace: Path, base: Path, minutes: float, log_file: Path, recipe: Mapping[str, float | None] | None = None
) -> dict:
    """``celeris-complete adapt --fresh`` on ``workspace`` in a child process; its model and figures.
    ``recipe``: adapt's options (``lr``, ``steps``, ``replay``), None for adapt's default."""
    command = [sys.executable, "-m", "celeris_complete.cli", "adapt", str(workspace), "--fresh"]
    command += ["--minutes", str(minutes), "--model", str(base)]
    for key, value in (recipe or {}).items():
        command += [f"--{key}", str(value)] if value is not None else []
    started = time.perf_counter()
    with open(log_file, "wb") as out:
        code = subprocess.call(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    if code != 0:
        tail = log_file.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise CelerisError(f"celeris-complete adapt {workspace} exited with status {code}:\n{tail}")
    return {**adapted_figures(adapt_dir(workspace) / "model"), "seconds": round(seconds, 1)}


def adapted_figures(model: Path) -> dict:
    """An adapted model's directory, training steps and check (the adaptation's own held-out files)."""
    try:
        check = json.loads((model / CHECK_FILE).read_text(encoding="utf-8"))
        training = json.loads((model / "config.json").read_text(encoding="utf-8")).get("training", {})
    except (OSError, ValueError) as exc:
        raise CelerisError(f"{model}: no finished adaptation ({exc})") from None
    keep = ("content_acc", "loss")
    return {
        "model": str(model),
        "steps": training.get("steps"),
        "check": {
            "passed": check.get("passed"),
            **{m: {k: check[m].get(k) for k in keep if k in check[m]} for m in MODELS if m in check},
        },
    }


# ---- one package ----------------------------------------------------------------------------
def _decoding(settings: Mapping) -> dict:
    return {k: v for k, v in settings.items() if k != "model"}


def _lift(base: Mapping, adapted: Mapping) -> dict:
    return {k: round(adapted[k] - base[k], 4) for k in ("exact_match", "edit_similarity") if k in base}


def paired_interval(base: Sequence[Mapping], adapted: Sequence[Mapping], draws: int = 2000, seed: int = 0) -> list:
    """95% interval of the mean edit-similarity lift over paired sites (a percentile bootstrap)."""
    diffs = [a["similarity"] - b["similarity"] for b, a in zip(base, adapted, strict=True)]
    if not diffs:
        return [0.0, 0.0]
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(draws))
    return [round(means[int(0.025 * draws)], 4), round(means[int(0.975 * draws) - 1], 4)]


def _lift_with_interval(results: Mapping[str, Sequence[Mapping]]) -> dict:
    figures = {m: summarize(results[m]) for m in MODELS}
    lift = {
        **_lift(figures["base"], figures["adapted"]),
        "edit_similarity_95": paired_interval(results["base"], results["adapted"]),
    }
    return {**figures, "lift": lift}


def evaluate_package(
    files: Mapping[str, str],
    adapt_names: Sequence[str],
    sites: Sequence,
    models: Mapping[str, Path],
    options: Mapping,
    drafts: Sequence[bool],
    package: str,
) -> dict:
    """Both models on ``sites`` with each drafts setting, the server's workspace being ``adapt_names``."""
    under_test = sorted({s.file for s in sites})
    runs: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="celeris-bench-adapt-") as tmp:
        root = Path(tmp) / package  # the workspace plus the files under test (the server's copy lacks them)
        write_files(root, files, [*adapt_names, *under_test])
        for drafted in drafts:
            key = "drafts_on" if drafted else "drafts_off"
            for label in MODELS:
                # The models' answers, not the quiet rule: a calibration is the base model's own (an adapted
                # model has none), so min_confidence would hold back the base model's unsure answers only.
                settings = {**options, "model": str(models[label]), "drafts": drafted, "min_confidence": 0.0}
                served = asyncio.run(_serve_sites(root, files, sites, settings))
                runs.setdefault(key, {})[label] = served
    out: dict = {}
    for key, pair in runs.items():
        base, adapted = (pair[m] for m in MODELS)
        out[key] = {
            **_lift_with_interval({m: pair[m]["results"] for m in MODELS}),
            "same_decoding": _decoding(base["server_settings"]) == _decoding(adapted["server_settings"]),
            "server_settings": base["server_settings"],
            "workspace_files": base["workspace_files"],
            "indexed_files": {m: pair[m]["indexed_files"] for m in MODELS},
            "results": {m: pair[m]["results"] for m in MODELS},
        }
    return out


def run_package(
    name: str,
    version: str,
    root: Path,
    minutes: float,
    base: Path,
    sites: int,
    max_files: int,
    seed: int,
    options: Mapping,
    drafts: Sequence[bool],
    keep_adapted: bool = False,
    say: Callable[[str], None] = lambda m: None,
    recipe: Mapping[str, float | None] | None = None,
) -> dict:
    files = python_files(root)
    cut = len(files) < MIN_FILES
    if cut:
        files = cut_into_parts(files)
    adapt_names, held = split_files(files, f"{name}:{seed}")
    chosen = choose_sites({f: files[f] for f in held}, sites, max_files, f"{name}:{seed}", max_share=1.0)
    if not chosen:
        raise CelerisError(f"{name}: no held-out file with {MIN_FILE_LINES} lines to complete")
    stage = stage_dir(name, version, seed)
    workspace = stage / name
    model = adapt_dir(workspace) / "model"
    if keep_adapted and (model / CHECK_FILE).exists() and workspace.is_dir():
        say(f"{name}: reusing the adapted model {model}")
        adapted = {**adapted_figures(model), "seconds": None, "reused": True}
    else:
        write_files(workspace, files, adapt_names)
        steps = (recipe or {}).get("steps")
        budget = f"{steps} steps" if steps else f"{minutes} min"
        say(f"{name}: adapting on {len(adapt_names)} files for {budget} ({len(held)} held out)")
        adapted = run_adapt(workspace, base, minutes, stage / "adapt.log", recipe)
    say(f"{name}: {len(chosen)} sites, base and adapted model")
    t0 = time.perf_counter()
    figures = evaluate_package(files, adapt_names, chosen, {"base": base, "adapted": Path(adapted["model"])},
                               options, drafts, name)  # fmt: skip
    return {
        "version": version,
        "files": len(files),
        "cut_into_parts": cut,
        "adapt_files": adapt_names,
        "held_out_files": held,
        "files_under_test": sorted({s.file for s in chosen}),
        "sites": len(chosen),
        "adapt": adapted,
        **figures,
        "evaluation_seconds": round(time.perf_counter() - t0, 1),
    }


# ---- the benchmark --------------------------------------------------------------------------
def run(
    packages: Sequence[tuple[str, str]] = PACKAGES,
    minutes: float = 10.0,
    model: str | None = None,
    sites: int = 100,
    max_files: int = 4,
    seed: int = 0,
    options: Mapping | None = None,
    drafts_off: bool = True,
    keep_adapted: bool = False,
    fetch: Callable[[str, str], Path] = fetch_package,
    progress: Callable[[str], None] | None = None,
    partial: Callable[[dict], None] | None = None,
    recipe: Mapping[str, float | None] | None = None,
) -> dict:
    """Per package and overall: base and adapted model on the held-out files' sites (see the module doc);
    ``partial`` gets the result so far after each package; ``recipe``: adapt's ``lr``, ``steps``, ``replay``
    (None or absent: adapt's default)."""
    recipe = dict(recipe or {})
    steps = recipe.get("steps")
    say = progress or (lambda message: None)
    base = Path(model).expanduser().resolve() if model else default_model_dir()
    if not (base / "config.json").is_file():
        raise CelerisError(f"{base}: not a model directory (no config.json)")
    drafts = (True, False) if drafts_off else (True,)
    options = {k: v for k, v in (options or {}).items() if k not in ("model", "drafts")}
    started = time.perf_counter()
    per_package: dict[str, dict] = {}
    out: dict = {}
    for name, version in packages:
        say(f"{name} {version}: fetching")
        result = run_package(name, version, fetch(name, version), minutes, base, sites, max_files, seed, options,
                             drafts, keep_adapted, say, recipe)  # fmt: skip
        per_package[name] = result
        on = result["drafts_on"]
        say(
            f"{name}: exact {on['base']['exact_match']:.1%} -> {on['adapted']['exact_match']:.1%}, edit "
            f"{on['base']['edit_similarity']:.3f} -> {on['adapted']['edit_similarity']:.3f} "
            f"({result['adapt']['steps']} steps)"
        )
        out = {
            "overall": overall(per_package, drafts),
            "packages": per_package,
            "minutes": None if steps else minutes,
            "steps": steps,
            "lr": recipe.get("lr") if recipe.get("lr") is not None else LR,
            "replay": recipe.get("replay") if recipe.get("replay") is not None else REPLAY,
            "base_model": str(base),
            "seed": seed,
            "sites_per_package": sites,
            "max_files": max_files,
            "options": dict(options),
            "seconds": round(time.perf_counter() - started, 1),
        }
        if partial is not None:
            partial(out)
    return out


def overall(per_package: Mapping[str, dict], drafts: Sequence[bool]) -> dict:
    """Figures over all packages' sites."""
    out = {}
    for key in ("drafts_on", "drafts_off")[: len(drafts)]:
        out[key] = _lift_with_interval(
            {m: [r for p in per_package.values() for r in p[key]["results"][m]] for m in MODELS}
        )
    return out


def without_sites(result: dict) -> dict:
    """The result less the per-site lists (for printing)."""
    out = dict(result)
    out["packages"] = {
        name: {k: ({x: y for x, y in v.items() if x != "results"} if k.startswith("drafts_") else v)
               for k, v in p.items() if k not in ("adapt_files",)}
        for name, p in result["packages"].items()
    }  # fmt: skip
    return out


def table(result: dict) -> str:
    keys = [k for k in ("drafts_on", "drafts_off") if k in result["overall"]]
    head = "| package | files adapted / held out | sites | adapt steps | held-out acc base / adapted |"
    rule = "|---|---|---|---|---|"
    for key in keys:
        label = key.replace("_", " ")
        head += f" {label}: exact base / adapted | {label}: edit sim base / adapted (lift, 95% interval) |"
        rule += "---|---|"
    lines = [head, rule]

    def pair(p: Mapping, key: str, figure: str, fmt: str) -> str:
        return f"{format(p[key]['base'][figure], fmt)} / {format(p[key]['adapted'][figure], fmt)}"

    def edit(p: Mapping, key: str) -> str:
        lift = p[key]["lift"]
        low, high = lift.get("edit_similarity_95", (None, None))
        interval = "" if low is None else f", [{low:+.3f}, {high:+.3f}]"
        return f"{pair(p, key, 'edit_similarity', '.3f')} ({lift['edit_similarity']:+.3f}{interval})"

    for name, p in result["packages"].items():
        check = p["adapt"]["check"]
        acc = f"{check.get('base', {}).get('content_acc')} / {check.get('adapted', {}).get('content_acc')}"
        row = f"| {name} {p['version']} | {len(p['adapt_files'])} / {len(p['held_out_files'])} | {p['sites']} "
        row += f"| {p['adapt']['steps']} | {acc} |"
        for key in keys:
            row += f" {pair(p, key, 'exact_match', '.1%')} | {edit(p, key)} |"
        lines.append(row)
    o = result["overall"]
    row = f"| overall | | {o[keys[0]]['base']['sites']} | | |"
    for key in keys:
        row += f" {pair(o, key, 'exact_match', '.1%')} | {edit(o, key)} |"
    lines.append(row)
    return "\n".join(lines)
