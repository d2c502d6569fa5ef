"""Fit ``drafts.RANK_WEIGHTS`` (how a continuation is scored among several) on sites in packages of
the training corpus, never on the benchmarks' packages: sites chosen as `bench repo` chooses them
(half after the indentation, half mid-line; the files under test out of the workspace's line table),
drafts only, no model.  Per site where ``drafts._ranked`` has a choice, each continuation's
``ranking_features`` and whether it is the line's rest; a conditional logit (softmax over a site's
continuations, L2) is fitted on seeds 0-3 and checked on seeds 4-5.  Prints top-1 (how often the
first continuation is right) for the previous rule (alike, then votes, then nearness), the weights in
drafts.py and the fitted ones, and writes them with ``--output``.

``--heldout``: also the sites of the training corpus's held-out validation files (``heldout_files``,
which ``scripts/heldout_draft_study.py`` uses too: 10 a file, each file's package the workspace, the
file left out), split in two by a hash of the file: the first half fitted with the packages' seeds 0-3, the
second checked with seeds 4-5. They hold the standard library, torch, transformers and the large
packages, where the 16 are small libraries.

    .venv/bin/python scripts/fit_draft_ranking.py [--output results/draft_ranking/fit.json]
    .venv/bin/python scripts/fit_draft_ranking.py --heldout [--output results/draft_ranking/fit-heldout.json]

The packages' sources come from the training corpus's cache (`celeris-complete train --packages`
downloads them); a package missing there is left out, and said so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from celeris_complete.bench.repo import PACKAGES as BENCHMARK_PACKAGES  # noqa: E402
from celeris_complete.bench.repo import choose_sites, cut_text, python_files  # noqa: E402
from celeris_complete.checks.postprocess import choose_mode, postprocess  # noqa: E402
from celeris_complete.drafts import search as drafts  # noqa: E402
from celeris_complete.training.packages import PINNED, _norm, cache_dir  # noqa: E402

# Training-corpus packages of a size like the benchmark's (tens of files): libraries, tools, a web stack.
PACKAGES = (
    "click", "flask", "attrs", "jinja2", "packaging", "tomli", "more-itertools", "requests", "markdown",
    "invoke", "httpx", "starlette", "typer", "pexpect", "fabric", "urllib3",
)  # fmt: skip
FIT_SEEDS, CHECK_SEEDS = (0, 1, 2, 3), (4, 5)


def collect(root: Path, name: str, seed: int) -> list[tuple[torch.Tensor, torch.Tensor, list[int]]]:
    """Per site with a choice: (features (n, k), right (n,), the previous rule's order as indices)."""
    files = python_files(root)
    sites = choose_sites(files, 100, 4, f"{name}:{seed}")
    under = {s.file for s in sites}
    table = drafts.LineTable()
    for path, text in files.items():
        if path not in under:
            table.set_file(path, text)
    return choices(files, sites, table)


def heldout_files(model: Path, part: int = 0, parts: int = 1):
    """Per source of the model's corpus (every ``parts``-th by name, from ``part``) that holds held-out
    validation files found on disk: (its name, its files, a line table of them all, and per held-out
    file (path, half by a hash of it, its sites: 10, as `bench repo` chooses them))."""
    manifest = json.loads((model / "corpus_manifest.json").read_text())
    held: dict[str, list[str]] = {}
    for entry in manifest["files"]:
        if entry["split"] == "validation":
            top, _, rel = entry["path"].partition("/")
            held.setdefault(top, []).append(rel)
    names = sorted(held)
    for source in manifest["sources"]:
        name = source["name"]
        if name not in held or names.index(name) % parts != part or not Path(source["root"]).is_dir():
            continue
        files = python_files(Path(source["root"]))
        table = drafts.LineTable()
        for path, text in files.items():
            table.set_file(path, text)
        under = []
        for path in held[name]:
            if path in files:
                half = int(hashlib.sha256(f"{name}/{path}".encode()).hexdigest(), 16) % 2
                under.append((path, half, choose_sites({path: files[path]}, 10, 1, "heldout:0", max_share=1.0)))
        yield name, files, table, under


def collect_heldout(model: Path) -> dict[int, list]:
    """The held-out validation files' sites with a choice, by half."""
    out: dict[int, list] = {0: [], 1: []}
    for _, files, table, under in heldout_files(model):
        for _, half, sites in under:
            out[half] += choices(files, sites, table)
    return out


def choices(files: dict[str, str], sites, table) -> list[tuple[torch.Tensor, torch.Tensor, list[int]]]:
    seen: list[dict] = []
    original = drafts.ranking_features

    def capture(*args, **kwargs):
        seen.append(original(*args, **kwargs))
        return seen[-1]

    drafts.ranking_features = capture
    out = []
    try:
        for site in sites:
            text = cut_text(files[site.file], site)
            cut = sum(len(line) + 1 for line in text.split("\n")[: site.line]) + site.col
            prefix, suffix = text[:cut], text[cut:]
            seen.clear()
            drafts.find_drafts(prefix, suffix, table, site.file, 3)  # the file itself is left out
            if not seen or len(seen[0]) < 2:
                continue
            mode = choose_mode(prefix, "auto")
            texts = list(seen[0])
            rows = [seen[0][t] for t in texts]
            expected = site.expected.rstrip()
            right = [postprocess(t, prefix, suffix, mode).split("\n")[0].rstrip() == expected for t in texts]
            previous = sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][1], -rows[i][-1]), reverse=True)
            out.append((torch.tensor([r[:-1] for r in rows]), torch.tensor(right), previous))
    finally:
        drafts.ranking_features = original
    return out


def top1(data, weights: torch.Tensor) -> int:
    return sum(int(right[int((x @ weights).argmax())]) for x, right, _ in data)


def fit(data, l2: float = 1e-2, epochs: int = 300, standardize: bool = False) -> torch.Tensor:
    """A conditional logit over each site's drafts (``data``: (features, right, _) per site); with
    ``standardize`` the features are scaled to unit variance while fitting (the weights returned are
    for the features as given)."""
    usable = [(x, right) for x, right, _ in data if right.any()]
    width = max(x.shape[0] for x, _ in usable)
    x = torch.zeros(len(usable), width, usable[0][0].shape[1])
    right = torch.zeros(len(usable), width, dtype=torch.bool)
    valid = torch.zeros(len(usable), width, dtype=torch.bool)
    for i, (xi, ri) in enumerate(usable):
        x[i, : len(xi)], right[i, : len(ri)], valid[i, : len(xi)] = xi, ri, True
    scale = torch.ones(x.shape[-1])
    if standardize:
        mean, scale = x[valid].mean(0), x[valid].std(0) + 1e-6
        x = (x - mean) / scale
    weights = torch.zeros(x.shape[-1], requires_grad=True)
    opt = torch.optim.Adam([weights], lr=0.05)
    for _ in range(epochs):
        opt.zero_grad()
        score = (x @ weights).masked_fill(~valid, float("-inf"))
        picked = score.masked_fill(~right, float("-inf"))
        loss = (torch.logsumexp(score, 1) - torch.logsumexp(picked, 1)).mean() + l2 * (weights**2).sum()
        loss.backward()
        opt.step()
    return weights.detach() / scale


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", type=Path)
    ap.add_argument("--heldout", action="store_true", help="also the held-out validation files' sites")
    ap.add_argument("--model", type=Path, default=Path(__file__).resolve().parent.parent / "models" / "default")
    args = ap.parse_args()
    benchmark = {_norm(n) for n, _ in BENCHMARK_PACKAGES}
    versions = dict(PINNED)
    by_seed: dict[int, list] = {s: [] for s in FIT_SEEDS + CHECK_SEEDS}
    used = []
    for name in PACKAGES:
        assert _norm(name) not in benchmark, f"{name} is a benchmark package"
        root = cache_dir() / "src" / f"{_norm(name)}-{versions[name]}"
        if not root.is_dir():
            print(f"{name}: not in {cache_dir() / 'src'}: left out (celeris-complete train --packages fetches it)")
            continue
        used.append(f"{name} {versions[name]}")
        for seed in by_seed:
            by_seed[seed] += collect(root, name, seed)
    fitting = [d for s in FIT_SEEDS for d in by_seed[s]]
    checking = [d for s in CHECK_SEEDS for d in by_seed[s]]
    heldout = collect_heldout(args.model) if args.heldout else {0: [], 1: []}
    packages_checking = checking
    fitting, checking = fitting + heldout[0], checking + heldout[1]
    if not fitting:
        raise SystemExit("no package of the training corpus found: nothing to fit")
    weights = fit(fitting)
    shipped = torch.tensor(drafts.RANK_WEIGHTS)

    def with_right(data) -> int:
        return sum(int(right.any()) for _, right, _ in data)

    def previous(data) -> int:
        return sum(int(right[order[0]]) for _, right, order in data)

    report = {
        "packages": used,
        "sites_with_a_choice": {"fit": len(fitting), "check": len(checking)},
        "with_a_right_one": {"fit": with_right(fitting), "check": with_right(checking)},
        "top1_previous_rule": {"fit": previous(fitting), "check": previous(checking)},
        "top1_shipped_weights": {"fit": top1(fitting, shipped), "check": top1(checking, shipped)},
        "top1_fitted_weights": {"fit": top1(fitting, weights), "check": top1(checking, weights)},
        "heldout_sites_with_a_choice": {"fit": len(heldout[0]), "check": len(heldout[1])},
        "check_packages_only": {
            "sites": len(packages_checking), "previous_rule": previous(packages_checking),
            "shipped_weights": top1(packages_checking, shipped), "fitted_weights": top1(packages_checking, weights),
        },
        "check_heldout_only": {
            "sites": len(heldout[1]), "previous_rule": previous(heldout[1]),
            "shipped_weights": top1(heldout[1], shipped), "fitted_weights": top1(heldout[1], weights),
        },
        "fitted_weights": [round(float(w), 3) for w in weights],
        "shipped_weights": list(drafts.RANK_WEIGHTS),
    }
    print(json.dumps(report, indent=1))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
