"""Commands that make models: ``train``, ``adapt``, ``corpus``, ``eval``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from celeris_complete.cli.app import (
    app,
    fail,
)
from celeris_complete.errors import CelerisError


@app.command()
def train(
    output: Annotated[Path, typer.Option("--output", "-o", help="Model directory to write.")],
    corpus: Annotated[
        Optional[list[Path]],
        typer.Option("--corpus", help="Source directory (repeatable); default: this Python's standard library."),
    ] = None,
    packages: Annotated[
        bool,
        typer.Option(
            "--packages",
            help="Add the pinned packages' sources to the standard library (`celeris-complete corpus` lists them).",
        ),
    ] = False,
    languages: Annotated[
        Optional[str],
        typer.Option(
            "--languages",
            help="Add the allowlisted packages of these languages (comma-separated, or all; `celeris-complete "
            "corpus --languages all` lists them): typescript, javascript, go, rust.",
        ),
    ] = None,
    exclude: Annotated[Optional[list[str]], typer.Option(help="Extra path glob to leave out (repeatable).")] = None,
    preset: Annotated[str, typer.Option(help="Model size: cpu or gpu.")] = "cpu",
    minutes: Annotated[Optional[float], typer.Option(help="Time budget; the learning rate decays over it.")] = None,
    steps: Annotated[Optional[int], typer.Option(help="Step budget (deterministic schedule).")] = None,
    batch_size: Annotated[Optional[int], typer.Option()] = None,
    lr: Annotated[Optional[float], typer.Option()] = None,
    context_len: Annotated[
        Optional[list[int]],
        typer.Option(
            help="Context tokens per sample (repeatable: each step draws one, longer ones in smaller batches)."
        ),
    ] = None,
    init_from: Annotated[
        Optional[Path], typer.Option(help="Start from this model directory's weights and tokenizer (its architecture).")
    ] = None,
    d_model: Annotated[Optional[int], typer.Option()] = None,
    n_layers: Annotated[Optional[int], typer.Option()] = None,
    n_heads: Annotated[Optional[int], typer.Option()] = None,
    seed: Annotated[int, typer.Option()] = 1234,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    precision: Annotated[str, typer.Option(help="auto, fp32 or bf16 (autocast).")] = "auto",
    threads: Annotated[
        int, typer.Option(help="CPU threads (0: the cores, shared among processes; 1: beside other work).")
    ] = 0,
    eval_every: Annotated[int, typer.Option(help="Validate every N steps.")] = 250,
    warmup_steps: Annotated[int, typer.Option(help="Steps of linear learning-rate warm-up.")] = 200,
    rest_of_line: Annotated[
        float, typer.Option(help="Share of spans from inside a line to its end (a cursor mid-line), 0 to 1.")
    ] = 0.0,
    stretch_minutes: Annotated[
        Optional[float],
        typer.Option(help="Stop after this long (checkpoint written); the same command goes on from there."),
    ] = None,
    stretch_steps: Annotated[
        Optional[int], typer.Option(help="Stop after this many steps, as --stretch-minutes.")
    ] = None,
    memory_mb: Annotated[
        Optional[float],
        typer.Option(
            help="On the CPU: the process's memory budget in MB (default: half of the memory available); "
            "each step's batch is split into passes that fit it."
        ),
    ] = None,
) -> None:
    """Train the infill model (resumes from OUTPUT/.work/checkpoint.safetensors when present)."""
    from celeris_complete.training import corpus as corpus_mod
    from celeris_complete.training.train import PRESETS, TrainArgs
    from celeris_complete.training.train import train as run_train

    if preset not in PRESETS:
        fail(f"--preset must be one of {', '.join(PRESETS)}")
    if device not in ("auto", "cpu", "cuda"):
        fail("--device must be auto, cpu or cuda")
    if precision not in ("auto", "fp32", "bf16"):
        fail("--precision must be auto, fp32 or bf16")
    roots = list(corpus) if corpus else corpus_mod.default_roots()
    sources = []
    if packages:
        from celeris_complete.training.packages import fetch_sources

        try:
            fetched = fetch_sources(progress=lambda m: typer.echo(m, err=True))
        except CelerisError as exc:
            fail(str(exc))
        sources = [{"package": "python-stdlib", "root": str(r), "name": r.name} for r in roots]
        sources += [s.row() for s in fetched]
        roots += [s.root for s in fetched]
    suffixes: tuple[str, ...] = (".py",)
    never: frozenset[str] = frozenset()
    if languages:
        wanted, suffixes = _languages(languages)
        from celeris_complete.bench.repo_languages import bench_file_hashes
        from celeris_complete.training.sources import fetch_allowed

        try:
            allowed = fetch_allowed(wanted, None, lambda m: typer.echo(m, err=True))
            never = frozenset(bench_file_hashes(wanted))
        except CelerisError as exc:
            fail(str(exc))
        if not sources:
            sources = [{"package": "python-stdlib", "root": str(r), "name": r.name} for r in roots]
        sources += [{**s.row(), "language": entry.language} for entry, s in allowed]
        roots += [s.root for _, s in allowed]
    args = TrainArgs(
        output=output,
        roots=roots,
        sources=sources,
        excludes=corpus_mod.DEFAULT_EXCLUDES + tuple(exclude or ()),
        suffixes=suffixes,
        never=never,
        preset=preset,
        minutes=minutes,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        context_len=list(context_len) if context_len else None,
        init_from=init_from,
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        seed=seed,
        device=device,
        precision=precision,
        threads=threads,
        eval_every=eval_every,
        warmup_steps=warmup_steps,
        rest_of_line=rest_of_line,
        stretch_minutes=stretch_minutes,
        stretch_steps=stretch_steps,
        memory_mb=memory_mb,
    )
    try:
        path = run_train(args)
    except CelerisError as exc:
        fail(str(exc))
    if os.environ.get("RANK", "0") == "0":  # rank 0 reports
        if path is None:
            typer.echo(f"stretch over: run the same command to go on ({output / '.work'} holds the checkpoint)")
        else:
            typer.echo(f"model written to {path}")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from celeris_complete.training.distributed import exit_after_group

        exit_after_group(0)


@app.command()
def adapt(
    workspace: Annotated[Path, typer.Argument(help="The repository to adapt to.")] = Path("."),
    minutes: Annotated[float, typer.Option(help="Training time; the learning rate decays over it.")] = 10,
    model: Annotated[Optional[str], typer.Option(help="Model to start from (default: the configured one).")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Start over from a new snapshot of the workspace.")] = False,
    parent_pid: Annotated[Optional[int], typer.Option(hidden=True, help="Stop when this process ends.")] = None,
    memory_mb: Annotated[
        Optional[float],
        typer.Option(help="Memory budget in MB (default: the setting adapt_memory_mb, 2048)."),
    ] = None,
    lr: Annotated[Optional[float], typer.Option(help="Peak learning rate (default 1e-4).")] = None,
    steps: Annotated[
        Optional[int], typer.Option(help="Train this many steps instead of --minutes (the same run under any load).")
    ] = None,
    replay: Annotated[
        Optional[float],
        typer.Option(help="Share of the training text replayed from the standard library the model saw (0 to <1)."),
    ] = None,
) -> None:
    """Train a copy of the model on the workspace's own Python files (at low priority; resumable), then
    compare it with the model it started from on held-out workspace files; the result goes under the
    user's cache, never inside the workspace."""
    from celeris_complete.config import load_settings
    from celeris_complete.system.parent_watch import exit_with_parent
    from celeris_complete.training.adapt import CHECK_FILE
    from celeris_complete.training.adapt import adapt as run_adapt

    if parent_pid:  # started by the language server (which lowered its priority): its checkpoint stays
        exit_with_parent(parent_pid, code=3, direct=True)
    else:
        try:
            os.nice(10)  # completions come first (this process's priority: never the caller's of adapt())
        except OSError:
            pass
    try:
        overrides = {"model": model} if model else {}
        if memory_mb is not None:
            overrides["adapt_memory_mb"] = memory_mb
        settings = load_settings(overrides)
        if lr is not None and not lr > 0:
            fail("--lr must be above 0")
        if steps is not None and steps < 1:
            fail("--steps must be at least 1")
        if replay is not None and not 0 <= replay < 1:
            fail("--replay is a share of the training text, from 0 to below 1")
        extra = {"lr": lr} if lr is not None else {}
        extra |= {"replay": replay} if replay is not None else {}
        out = run_adapt(workspace, settings, minutes, fresh=fresh, steps=steps, **extra)
        verdict = json.loads((out / CHECK_FILE).read_text(encoding="utf-8"))
    except CelerisError as exc:
        fail(str(exc))
    base, adapted = verdict["base"]["content_acc"], verdict["adapted"]["content_acc"]
    typer.echo(f"held-out workspace files, masked-token accuracy: base {base}, adapted {adapted}")
    if verdict["passed"]:
        typer.echo(f"adapted model written to {out} (use it with --model {out} or the setting model)")
    else:
        typer.echo(f"adapted model written to {out}, but it is not better than the base model on held-out files")


def _languages(spec: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(languages, every source suffix with Python's) from ``--languages`` (comma-separated, or all)."""
    from celeris_complete.training.sources import SUFFIXES

    wanted = tuple(SUFFIXES) if spec == "all" else tuple(x.strip() for x in spec.split(",") if x.strip())
    unknown = [x for x in wanted if x not in SUFFIXES]
    if unknown or not wanted:
        fail(f"unknown language(s) {', '.join(unknown) or spec!r}: choose from {', '.join(SUFFIXES)} or all")
    return wanted, (".py",) + tuple(s for x in wanted for s in SUFFIXES[x])


@app.command("corpus")
def corpus_command(
    packages: Annotated[bool, typer.Option("--packages", help="Include the pinned packages (downloads them).")] = False,
    languages: Annotated[
        Optional[str],
        typer.Option(
            "--languages",
            help="Also the allowlisted packages of these languages (comma-separated, or all; fetched from npm and "
            "Debian): typescript, javascript, go, rust.",
        ),
    ] = None,
) -> None:
    """The training corpus, per source: files kept, bytes, licence (what `train --packages` reads); with
    --languages, the allowlisted packages of other languages too (training/sources.py)."""
    from collections import Counter

    from celeris_complete.training import corpus as corpus_mod
    from celeris_complete.training import sources as sources_mod
    from celeris_complete.training.packages import fetch_sources

    rows = [("python-stdlib", "", "PSF-2.0", r) for r in corpus_mod.default_roots()]
    suffixes: tuple[str, ...] = (".py",)
    wanted = None
    if languages:
        wanted, suffixes = _languages(languages)
    try:
        if packages:
            rows += [(s.package, s.version, s.licence, s.root) for s in fetch_sources()]
        if wanted:
            say = lambda m: typer.echo(m, err=True)  # noqa: E731
            rows += [(s.package, s.version, s.licence, s.root) for _, s in sources_mod.fetch_allowed(wanted, None, say)]
        files = corpus_mod.gather([r[3] for r in rows], suffixes=suffixes)
        if wanted:  # never a file of a package a benchmark evaluates on, even as a copy in another package
            from celeris_complete.bench.repo_languages import bench_file_hashes

            benched = bench_file_hashes(wanted)
            dropped = [f.relpath for f in files if f.sha256 in benched]
            files = [f for f in files if f.sha256 not in benched]
            for path in dropped:
                typer.echo(f"dropped (a bench repo file): {path}", err=True)
    except CelerisError as exc:
        fail(str(exc))
    count, size = Counter(), Counter()
    for f in files:
        top = f.relpath.split("/", 1)[0]
        count[top] += 1
        size[top] += len(f.text)
    for package, version, licence, root in rows:
        typer.echo(f"{package:40} {version:14} {count[root.name]:6} files {size[root.name] / 1e6:8.2f} MB  {licence}")
    typer.echo(f"{'total':55} {len(files):6} files {sum(size.values()) / 1e6:8.2f} MB")


@app.command("eval")
def eval_command(
    model: Annotated[Optional[Path], typer.Option(help="Model directory (default: the shipped model).")] = None,
    corpus: Annotated[
        Optional[list[Path]], typer.Option("--corpus", help="Where to find the held-out files (default: stdlib).")
    ] = None,
    batches: Annotated[int, typer.Option(help="Batches of 32 held-out samples.")] = 16,
    precision: Annotated[str, typer.Option(help="auto, fp32 or bf16 (autocast).")] = "auto",
    context_len: Annotated[
        Optional[int], typer.Option(help="Context tokens per sample (default: the longest the model trained on).")
    ] = None,
    val_bin: Annotated[
        Optional[Path],
        typer.Option(help="Held-out tokens of a training run (RUN/.work/val.bin) instead of the model's own files."),
    ] = None,
) -> None:
    """Validation figures of a model on its held-out split (the files its manifest marks 'validation')."""
    import json

    from celeris_complete.model.directory import default_model_dir
    from celeris_complete.training.validation import validate_model_dir

    try:
        figures = validate_model_dir(
            model or default_model_dir(), list(corpus) if corpus else None, batches, precision, context_len, val_bin
        )
    except CelerisError as exc:
        fail(str(exc))
    found, listed = figures.get("files_found"), figures.get("files_listed")
    if found is not None and found < listed:
        typer.echo(
            f"celeris-complete: warning: {found} of the {listed} held-out files were found, so these figures are "
            "not the model card's: the rest are in sources not on this machine "
            "(`celeris-complete corpus --packages` fetches the pinned packages')",
            err=True,
        )
    typer.echo(json.dumps(figures, indent=2))
