"""Benchmarks of the parts, re-run when a part changes: ``bench checks``, ``bench drafts``, ``bench edits``,
``bench footprint``, ``bench train-speed``, ``bench shapes``; and ``bench calibrate``, which fits the
answers' confidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from celeris_complete.cli.app import JsonOutputOption, ModelOption, QuantOption, ThreadsOption, bench_app, fail
from celeris_complete.errors import CelerisError

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _report(result: dict | list, text: str, as_json: bool, output: Optional[Path]) -> None:
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    typer.echo(json.dumps(result, indent=2) if as_json else text)


def _engine(model: Optional[str], quant: Optional[str], threads: Optional[int] = None):
    from celeris_complete.config import load_settings
    from celeris_complete.engine import Engine

    return Engine(load_settings(dict(model=model, quant=quant, threads=threads)))


@bench_app.command("checks")
def bench_checks(
    roots: Annotated[
        Optional[list[Path]], typer.Argument(help="Folders of Python files (default: the standard library).")
    ] = None,
    files: Annotated[int, typer.Option(help="Files sampled.")] = 300,
    lines: Annotated[int, typer.Option(help="Lines sampled in each file.")] = 15,
    seed: Annotated[int, typer.Option(help="Chooses the files and lines.")] = 0,
    requests: Annotated[
        int, typer.Option(help="Also time the check within real completions at this many places (0: not).")
    ] = 0,
    model: ModelOption = None,
    quant: QuantOption = None,
    as_json: AsJson = False,
    output: JsonOutputOption = None,
) -> None:
    """The answer checks: right lines of real files they blame, broken lines they let through, their time
    per judgement; with --requests, their time within completions per verdict."""
    from celeris_complete.bench.checks import default_roots, precision, render, verdict_times

    if files < 1 or lines < 1 or requests < 0:
        fail("--files and --lines must be at least 1, --requests at least 0")
    folders = roots or default_roots()
    missing = [str(r) for r in folders if not r.is_dir()]
    if missing:
        fail(f"not a folder: {', '.join(missing)}")
    result: dict = {"roots": [str(r) for r in folders], "precision": precision(folders, files, lines, seed)}
    if requests:
        try:
            result["verdict_times"] = verdict_times(_engine(model, quant), requests)
        except CelerisError as exc:
            fail(str(exc))
    _report(result, render(result), as_json, output)


@bench_app.command("drafts")
def bench_drafts(
    seeds: Annotated[str, typer.Option(help="Comma-separated bench repo seeds (its sites).")] = "0,1,2,3",
    sites: Annotated[int, typer.Option(help="Sites per package, as bench repo --sites.")] = 100,
    timing: Annotated[
        bool, typer.Option("--timing/--no-timing", help="Also time the search in a document of this package.")
    ] = True,
    as_json: AsJson = False,
    output: JsonOutputOption = None,
) -> None:
    """Drafts alone, no model: how often the line's rest is among the first 1, 2, 3 or 5 drafts on bench
    repo's sites, and the document search's time per call."""
    from celeris_complete.bench.drafts import render, run_right_drafts, search_times
    from celeris_complete.bench.repo import PACKAGES
    from celeris_complete.bench.repo_languages import fetch_package, python_files
    from celeris_complete.bench.selftest import SOURCES

    try:
        chosen = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        fail(f"--seeds {seeds!r}: give numbers separated by commas")
    if sites < 1:
        fail("--sites must be at least 1")
    result: dict = {}
    try:
        if chosen:
            result["right_drafts"] = run_right_drafts(PACKAGES, fetch_package, python_files, chosen, sites)
    except CelerisError as exc:
        fail(str(exc))
    if timing:
        own = python_files(SOURCES)
        document = own.pop("engine/pipeline.py")
        result["search_times"] = search_times(document, own)
    _report(result, render(result), as_json, output)


@bench_app.command("footprint")
def bench_footprint(
    parts: Annotated[
        str, typer.Option("--what", help="Comma-separated: engine, index, idle, huge.")
    ] = "engine,index,idle,huge",
    places: Annotated[int, typer.Option(help="engine: places completed (three keystrokes each).")] = 400,
    model: ModelOption = None,
    quant: QuantOption = None,
    folder: Annotated[
        Optional[Path], typer.Option(help="index: a folder of Python files (default: the standard library).")
    ] = None,
    index_files: Annotated[int, typer.Option(help="index: files added and removed each cycle.")] = 1500,
    workspace: Annotated[Path, typer.Option(help="idle, huge: the language server's workspace folder.")] = Path("."),
    idle_seconds: Annotated[float, typer.Option(help="idle: seconds of nobody typing.")] = 20.0,
    as_json: AsJson = False,
    output: JsonOutputOption = None,
) -> None:
    """What the product costs beside the editor: the engine's resident memory over many completions, the
    snippet index's as a large folder comes and goes, the language server's CPU while idle, and its
    timings with a 22 MB document."""
    from celeris_complete.bench import footprint

    wanted = [p.strip() for p in parts.split(",") if p.strip()]
    unknown = sorted(set(wanted) - {"engine", "index", "idle", "huge"})
    if unknown or not wanted:
        fail(f"--what {parts!r}: choose from engine, index, idle, huge")
    if places < 1 or index_files < 1 or idle_seconds <= 0:
        fail("--places and --index-files must be at least 1, --idle-seconds above 0")
    for name, path in (("--folder", folder), ("--workspace", workspace)):
        if path is not None and not path.is_dir():
            fail(f"{name} {path}: not a folder")
    result: dict = {}
    server = {"model": model} if model else {}
    try:
        if "index" in wanted:  # first: before the engine's memory is in the process
            result["index"] = footprint.index_memory(folder or footprint.default_folder(), index_files)
        if "engine" in wanted:
            result["engine"] = footprint.engine_memory(_engine(model, quant), places)
        if "idle" in wanted:
            result["idle"] = footprint.server_idle_cpu(workspace, idle_seconds, server)
        if "huge" in wanted:
            result["huge"] = footprint.huge_document(workspace, options=server)
    except (CelerisError, RuntimeError) as exc:
        fail(str(exc))
    _report(result, footprint.render(result), as_json, output)


@bench_app.command("train-speed")
def bench_train_speed(
    configs: Annotated[
        str, typer.Option(help="Comma-separated MODE:PRECISION (eager or compile, fp32 or bf16).")
    ] = "eager:fp32,eager:bf16,compile:fp32,compile:bf16",
    d_model: Annotated[int, typer.Option()] = 256,
    n_layers: Annotated[int, typer.Option()] = 6,
    n_heads: Annotated[int, typer.Option()] = 4,
    steps: Annotated[int, typer.Option(help="Timed steps per configuration (after 3 untimed).")] = 12,
    batch: Annotated[int, typer.Option(help="Samples per step.")] = 16,
    context: Annotated[int, typer.Option(help="Context tokens per sample.")] = 384,
    threads: ThreadsOption = None,
    busy: Annotated[int, typer.Option(help="Single-threaded busy processes running meanwhile.")] = 0,
    model: ModelOption = None,
    as_json: AsJson = False,
    output: JsonOutputOption = None,
) -> None:
    """Training throughput of the real training step on this machine (tokens/s) per configuration, a
    fresh model of the given size on random batches (the tokenizer: --model's, default the shipped one)."""
    wanted = [c.strip() for c in configs.split(",") if c.strip()]
    known = {f"{m}:{p}" for m in ("eager", "compile") for p in ("fp32", "bf16")}
    bad = [c for c in wanted if c not in known]
    if bad or not wanted:
        fail(f"--configs {configs!r}: give MODE:PRECISION from {', '.join(sorted(known))}")
    if min(steps, batch, context, d_model, n_layers, n_heads) < 1 or busy < 0 or d_model % n_heads:
        fail("--steps, --batch, --context and the sizes must be at least 1, --d-model a multiple of --n-heads")
    import torch

    from celeris_complete.bench.train_speed import run
    from celeris_complete.model.directory import default_model_dir, load_model_dir

    if threads:
        torch.set_num_threads(threads)
    try:
        tok = load_model_dir(Path(model) if model else default_model_dir()).tokenizer
    except CelerisError as exc:
        fail(str(exc))
    rows = run(tok, wanted, d_model, n_layers, n_heads, steps, batch, context, busy)
    text = "\n".join(
        f"{r['config']:13} {r['params_M']}M parameters, {r['threads']} threads, {r['busy']} busy: "
        f"step {r['step_s']} s, "
        f"{r['tokens_per_s']:,} tokens/s (mean {r['tokens_per_s_mean']:,})"
        for r in rows
    )
    _report(rows, text, as_json, output)


@bench_app.command("shapes")
def bench_shapes(
    shapes: Annotated[
        Optional[list[str]], typer.Argument(help="D_MODELxLAYERSxHEADS (default: 384x8x6 512x8x8 384x6x6 320x8x5).")
    ] = None,
    requests: Annotated[int, typer.Option(help="selftest's places per shape.")] = 12,
    model: Annotated[Optional[str], typer.Option(help="The tokenizer and decoding settings to use.")] = None,
    as_json: AsJson = False,
    output: JsonOutputOption = None,
) -> None:
    """Engine latency of model shapes before training one: random weights, a model's tokenizer and
    decoding settings, selftest on each."""
    from celeris_complete.bench.shapes import SHAPES, run
    from celeris_complete.model.directory import default_model_dir

    if requests < 1:
        fail("--requests must be at least 1")
    try:
        rows = run(Path(model) if model else default_model_dir(), shapes or SHAPES, requests)
    except CelerisError as exc:
        fail(str(exc))
    text = "\n".join(
        f"{r['shape']}: {r['params_M']}M parameters, keystroke p50 / p95 {r['keystroke_p50_ms']} / "
        f"{r['keystroke_p95_ms']} ms, new place p50 / p95 {r['new_place_p50_ms']} / {r['new_place_p95_ms']} ms"
        for r in rows
    )
    _report(rows, text, as_json, output)


@bench_app.command("calibrate")
def bench_calibrate(
    model: Annotated[Optional[str], typer.Option(help="The model directory (default: the shipped one).")] = None,
    sites_per_file: Annotated[int, typer.Option(help="Sites in each held-out file.")] = 10,
    blank_per_file: Annotated[
        Optional[int],
        typer.Option(help="Also this many whole lines removed per file, the cursor on the empty line (default 5)."),
    ] = None,
    sites: Annotated[
        Optional[Path], typer.Option(help="Fit on these collected sites (a --sites-output file) instead of collecting.")
    ] = None,
    sites_output: Annotated[Optional[Path], typer.Option(help="Write the collected sites here.")] = None,
    write: Annotated[
        bool, typer.Option("--write", help="Write confidence.json into the model directory (the engine then uses it).")
    ] = False,
    plot: Annotated[Optional[Path], typer.Option(help="Reliability diagram, precision/coverage curve (PNG).")] = None,
    output: JsonOutputOption = None,
) -> None:
    """Fit the answers' confidence: complete at sites in the training corpus's held-out files (never a
    benchmark's packages) through the engine, then a calibrated probability that an answer is right,
    cross-validated over two halves of the files, a model per place of the cursor (an empty line, after
    the indentation, mid-line); its error and the default threshold at each place (min_confidence)."""
    import numpy as np

    from celeris_complete.bench import calibration, heldout
    from celeris_complete.engine.confidence import FILE
    from celeris_complete.model.directory import default_model_dir

    blank_per_file = heldout.BLANK_PER_FILE if blank_per_file is None else blank_per_file
    if sites_per_file < 1 or blank_per_file < 0:
        fail("--sites-per-file must be at least 1, --blank-per-file at least 0")
    model_dir = Path(model).expanduser() if model else default_model_dir()
    if not (model_dir / "corpus_manifest.json").is_file():
        fail(f"{model_dir}: no corpus_manifest.json (the held-out files are the model's own)")
    try:
        if sites is not None:
            rows = json.loads(sites.read_text(encoding="utf-8"))["sites"]
        else:
            engine = _engine(str(model_dir), None, threads=1)  # one thread: a busy machine stalls two
            say = lambda m: typer.echo(m, err=True)  # noqa: E731
            rows = heldout.collect(engine, model_dir, sites_per_file, blank_per_file, progress=say)
            if sites_output:
                sites_output.write_text(json.dumps({"sites": rows}) + "\n", encoding="utf-8")
        spec, report = calibration.fit_confidence(rows)
    except (OSError, ValueError, KeyError, CelerisError) as exc:
        fail(str(exc))
    at = report["at_default"]
    text = (
        f"{report['sites']} sites in {report['files']} held-out files of {report['sources']} sources, "
        f"{report['shown']} answers shown, {report['right']} right\n"
        f"expected calibration error per half (out of fold): {report['ece_per_fold']}\n"
        f"at each place's min_confidence: right kept {at['right_kept']:.1%}, "
        f"wrong kept {at['wrong_kept']:.1%}, precision {at['precision']:.1%}, coverage {at['coverage']:.1%}"
    )
    for name, here in report["per_place"].items():
        text += (
            f"\n  {name:6} min_confidence {spec['places'][name]['min_confidence']}: {here['shown']} shown, "
            f"right kept {here['right_kept']:.1%}, wrong kept {here['wrong_kept']:.1%}"
        )
    if plot:
        oof, labels, cut = (np.array(report[k]) for k in ("out_of_fold", "labels", "thresholds"))
        calibration.plot(plot, oof, labels, cut, f"{model_dir.name}: held-out corpus sites")
    if write:
        (model_dir / FILE).write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
        text += f"\nwritten to {model_dir / FILE}"
    summary = {k: v for k, v in report.items() if k not in ("out_of_fold", "labels", "thresholds")}
    _report({"calibration": spec, "report": summary}, text, False, output)


@bench_app.command("edits")
def bench_edits(
    repos: Annotated[list[Path], typer.Argument(help="Git repositories (work trees or bare) not in the corpus.")],
    per_category: Annotated[int, typer.Option(help="Tasks sampled per category and repository.")] = 100,
    seed: Annotated[int, typer.Option(help="Chooses the tasks.")] = 0,
    suffix: Annotated[list[str], typer.Option(help="File suffixes mined (repeat the option).")] = [".py"],  # noqa: B006
    commits: Annotated[int, typer.Option(help="The most recent commits read per repository.")] = 2_000,
    as_json: AsJson = False,
    output: JsonOutputOption = None,
) -> None:
    """Next edits (celeris/nextEdit's propagation), on tasks mined from git histories: after one hunk of
    a commit, is the suggestion another hunk of it, exactly; categories below, above, far (a jump),
    other (hunks that do not repeat one change) and noise (a lone small change: nothing should follow)."""
    from celeris_complete.bench.edits import mine, render, run_task, sample, summarize

    if per_category < 1:
        fail("--per-category must be at least 1")
    result: dict = {"repos": {}, "per_category": per_category, "seed": seed}
    every = []
    try:
        for repo in repos:
            tasks = sample(mine(repo, tuple(suffix), commits), per_category, seed)
            rows = [run_task(t) for t in tasks]
            every += rows
            result["repos"][str(repo)] = summarize(rows)
    except CelerisError as exc:
        fail(str(exc))
    result["overall"] = summarize(every)
    text = "\n\n".join(f"{name}\n{render(s)}" for name, s in [*result["repos"].items(), ("overall", result["overall"])])
    _report(result, text, as_json, output)
