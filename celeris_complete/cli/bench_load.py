"""Benchmarks through the real servers: ``bench lsp``, ``repo``, ``adapt``, ``serve``, ``soak``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from celeris_complete.cli.app import (
    BackendOption,
    JsonOutputOption,
    KeysPerSecondOption,
    ModelOption,
    QuantOption,
    StepsOption,
    bench_app,
    fail,
    server_options,
)
from celeris_complete.errors import CelerisError


@bench_app.command("lsp")
def bench_lsp(
    model: ModelOption = None,
    seconds: Annotated[float, typer.Option(help="How long to type.")] = 60.0,
    keys_per_second: KeysPerSecondOption = 20.0,
    quant: Annotated[Optional[str], typer.Option(help="none or int8.")] = None,
    backend: BackendOption = None,
    invoked_every: Annotated[
        int,
        typer.Option(help="Also an invoked request (several alternatives) after every Nth keystroke (0: none)."),
    ] = 0,
    alternatives: Annotated[Optional[int], typer.Option(help="Completions an invoked request asks for.")] = None,
    think_s: Annotated[float, typer.Option(help="Seconds the typist stops after each line.")] = 0.0,
    language: Annotated[
        str, typer.Option(help="python (this package's files), or the files of that language's bench repo package.")
    ] = "python",
    setting: Annotated[
        Optional[list[str]], typer.Option("--set", help="Any other server setting, KEY=VALUE (repeatable).")
    ] = None,
    output: JsonOutputOption = None,
) -> None:
    """Type real files into the real language server over stdio; client-observed latency and memory
    (and, with --invoked-every, the latency of invoked requests with alternatives); --language: files in
    another language (the largest of its bench repo packages)."""
    import json

    from celeris_complete.bench.lsp import run

    if invoked_every < 0 or think_s < 0:
        fail("--invoked-every and --think-s must be 0 or more")
    options = server_options(dict(quant=quant, backend=backend, alternatives=alternatives), setting)
    try:
        result = run(model, seconds, keys_per_second, options, invoked_every, think_s, language=language)
    except RuntimeError as exc:
        fail(str(exc))
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    typer.echo(json.dumps(result, indent=2))


@bench_app.command("repo")
def bench_repo(
    model: ModelOption = None,
    sites: Annotated[int, typer.Option(help="Sites per package (half after the indentation, half mid-line).")] = 100,
    files: Annotated[int, typer.Option(help="Files under test per package (at most half of its files).")] = 4,
    packages: Annotated[
        Optional[str], typer.Option(help="Comma-separated subset of the pinned packages (default: all).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Chooses the files and sites.")] = 0,
    language: Annotated[
        str, typer.Option(help="python, typescript, javascript, go or rust (packages from PyPI, npm, Debian).")
    ] = "python",
    steps: StepsOption = None,
    quant: QuantOption = None,
    backend: BackendOption = None,
    budget_ms: Annotated[Optional[float], typer.Option(help="The server's decoding deadline (default 100).")] = None,
    setting: Annotated[
        Optional[list[str]], typer.Option("--set", help="Any other server setting, KEY=VALUE (repeatable).")
    ] = None,
    output: Annotated[Optional[Path], typer.Option(help="Write the full JSON (every site) here.")] = None,
    plot: Annotated[
        Optional[Path], typer.Option(help="The answers' reliability diagram and precision/coverage curve (PNG).")
    ] = None,
    invoked: Annotated[
        bool,
        typer.Option(
            "--invoked", help="Requests as a user makes them (with the server's alternatives): one item exact too."
        ),
    ] = False,
) -> None:
    """Complete lines in real packages the model never saw (pinned versions, downloaded with pip, npm or
    apt-get into a cache) through the real language server: exact match, edit similarity, empty answers, latency."""
    import json

    from celeris_complete.bench.repo import run, table, without_sites
    from celeris_complete.bench.repo_languages import LANGUAGES

    if language not in LANGUAGES:
        fail(f"unknown language {language}: choose from {', '.join(LANGUAGES)}")
    pinned = {p.name: p.version for p in LANGUAGES[language].packages}
    chosen = [p.strip() for p in packages.split(",") if p.strip()] if packages else list(pinned)
    unknown = [p for p in chosen if p not in pinned]
    if unknown:
        fail(f"unknown package(s) {', '.join(unknown)}: choose from {', '.join(pinned)}")
    if sites < 1 or files < 1:
        fail("--sites and --files must be at least 1")
    options = dict(model=model, steps=steps, quant=quant, backend=backend, budget_ms=budget_ms)
    options = server_options(options, setting)
    try:
        result = run(
            [(p, pinned[p]) for p in chosen],
            sites,
            files,
            seed,
            options,
            progress=lambda m: typer.echo(m, err=True),
            invoked=invoked,
            language=language,
        )
    except (CelerisError, RuntimeError) as exc:
        fail(str(exc))
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if plot:
        every = [r for p in result["packages"].values() for r in p["results"]]
        plot_confidence(plot, every, f"bench repo {language}, seed {seed}")
    typer.echo(table(result))
    typer.echo(json.dumps(without_sites(result), indent=2))


def plot_confidence(path: Path, results: list[dict], title: str) -> None:
    """bench repo's and bench quality's ``--plot``: their answers' confidence against being right."""
    import numpy as np

    from celeris_complete.bench.calibration import plot
    from celeris_complete.bench.repo import confidence_points

    p, y, t = confidence_points(results)
    if not p:
        fail("no answer has a confidence to plot (a model without confidence.json?)")
    plot(path, np.array(p), np.array(y), np.array(t), title)


@bench_app.command("adapt")
def bench_adapt(
    minutes: Annotated[float, typer.Option(help="Adaptation time per package.")] = 10.0,
    model: Annotated[Optional[str], typer.Option(help="The base model directory.")] = None,
    sites: Annotated[int, typer.Option(help="Sites per package, in its held-out files.")] = 100,
    files: Annotated[int, typer.Option(help="Held-out files with sites, at most, per package.")] = 4,
    packages: Annotated[
        Optional[str], typer.Option(help="Comma-separated subset of bench repo's packages (default: all).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Chooses the split, the files and the sites.")] = 0,
    drafts_off: Annotated[
        bool, typer.Option("--drafts-off/--no-drafts-off", help="Also measure both models with drafts off.")
    ] = True,
    keep_adapted: Annotated[
        bool, typer.Option("--keep-adapted", help="Reuse a finished adaptation of the same split instead of training.")
    ] = False,
    budget_ms: Annotated[Optional[float], typer.Option(help="The server's decoding deadline (default 100).")] = None,
    setting: Annotated[
        Optional[list[str]], typer.Option("--set", help="Any other server setting, KEY=VALUE (repeatable).")
    ] = None,
    output: Annotated[Optional[Path], typer.Option(help="Write the full JSON (every site) here.")] = None,
    lr: Annotated[Optional[float], typer.Option(help="The adaptations' peak learning rate (default: adapt's).")] = None,
    steps: Annotated[
        Optional[int], typer.Option(help="Adapt this many steps instead of --minutes (the same run under any load).")
    ] = None,
    replay: Annotated[
        Optional[float], typer.Option(help="Share of replayed standard-library text (default: adapt's).")
    ] = None,
) -> None:
    """The lift of adapting the model to a repository: for each bench repo package, adapt a copy of the
    model on 80% of its files for --minutes (celeris-complete adapt), then complete lines in the other 20%
    with the base and the adapted model through the real language server: exact match, edit similarity."""
    from celeris_complete.bench.adapt import run, table, without_sites
    from celeris_complete.bench.repo import PACKAGES

    pinned = dict(PACKAGES)
    chosen = [p.strip() for p in packages.split(",") if p.strip()] if packages else list(pinned)
    unknown = [p for p in chosen if p not in pinned]
    if unknown:
        fail(f"unknown package(s) {', '.join(unknown)}: choose from {', '.join(pinned)}")
    if sites < 1 or files < 1 or minutes <= 0 or (lr is not None and not lr > 0) or (steps is not None and steps < 1):
        fail("--sites, --files and --steps must be at least 1, --minutes and --lr above 0")
    if replay is not None and not 0 <= replay < 1:
        fail("--replay is a share of the training text, from 0 to below 1")
    options = server_options(dict(budget_ms=budget_ms), setting)
    for key in ("model", "drafts", "min_confidence"):
        if key in options:
            fail(f"--set {key}: bench adapt sets it itself (--model, --drafts-off; every answer shown)")

    def save(result: dict) -> None:  # after each package: an interrupted run keeps what it measured
        if output:
            output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    try:
        result = run(
            [(p, pinned[p]) for p in chosen], minutes, model, sites, files, seed, options, drafts_off, keep_adapted,
            progress=lambda m: typer.echo(m, err=True), partial=save,
            recipe={"lr": lr, "steps": steps, "replay": replay},
        )  # fmt: skip
    except (CelerisError, RuntimeError) as exc:
        fail(str(exc))
    typer.echo(table(result))
    typer.echo(json.dumps(without_sites(result), indent=2))


@bench_app.command("serve")
def bench_serve(
    clients: Annotated[str, typer.Option(help="Comma-separated numbers of concurrent clients.")] = "1,4,16,64",
    seconds: Annotated[float, typer.Option(help="How long each level runs.")] = 20.0,
    url: Annotated[
        Optional[str], typer.Option(help="A running server (default: start one on a free loopback port).")
    ] = None,
    model: Annotated[Optional[str], typer.Option(help="Model directory (for the server it starts).")] = None,
    api_key_env: Annotated[Optional[str], typer.Option(help="Send this environment variable's key.")] = None,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads of the server it starts (0: all).")] = None,
    batch: Annotated[
        Optional[bool],
        typer.Option("--batch/--no-batch", help="Whether the server it starts batches requests (default: its own)."),
    ] = None,
    quant: Annotated[Optional[str], typer.Option(help="--quant of the server it starts (default: its own).")] = None,
    typing: Annotated[
        bool, typer.Option("--typing", help="Each client types into a place, a few characters per request.")
    ] = False,
    locust: Annotated[
        bool, typer.Option("--locust", help="Drive the load with locust (headless) instead of the built-in client.")
    ] = False,
    output: JsonOutputOption = None,
) -> None:
    """HTTP server throughput and latency at several numbers of concurrent clients, the server
    batching requests or not; prints a Markdown table."""
    import json

    try:
        from celeris_complete.bench.serve import run, table
    except ImportError as exc:
        fail(f"bench serve needs httpx and the server packages ({exc.name} is missing): pip install -e '.[test]'")
    try:
        levels = [int(c) for c in clients.split(",") if c.strip()]
    except ValueError:
        fail("--clients takes comma-separated whole numbers, e.g. 1,4,16,64")
    if not levels or min(levels) < 1 or seconds <= 0:
        fail("--clients must be positive numbers and --seconds positive")
    key = None
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            fail(f"--api-key-env {api_key_env}: that environment variable is not set")
    try:
        progress = lambda m: typer.echo(m, err=True)  # noqa: E731
        server = dict(progress=progress, threads=threads, batch=batch, quant=quant)
        if locust and typing:
            fail("--typing is a workload of the built-in client, not of --locust")
        if locust:
            from celeris_complete.bench.locust import run as run_locust

            result = run_locust(levels, seconds, url, model, key, **server)
        else:
            result = run(levels, seconds, url, model, key, typing=typing, **server)
    except RuntimeError as exc:
        fail(str(exc))
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if locust:
        from celeris_complete.bench.locust import table as locust_table

        typer.echo(locust_table(result))
    else:
        typer.echo(table(result))


@bench_app.command("soak")
def bench_soak(
    model: ModelOption = None,
    minutes: Annotated[float, typer.Option(help="How long to type.")] = 10.0,
    keys_per_second: KeysPerSecondOption = 20.0,
    changing_workspace: Annotated[
        bool,
        typer.Option(
            "--changing-workspace", help="Create, edit and delete files and add and remove a large folder meanwhile."
        ),
    ] = False,
    output: Annotated[Optional[Path], typer.Option(help="Write the JSON (every 10 s sample too) here.")] = None,
) -> None:
    """Type into the real language server for minutes on end (several files open and closed, workspace snippets
    on): memory, threads and file descriptors every 10 s, latency percentiles per minute, against the targets."""
    import json

    from celeris_complete.bench.soak import run, table

    if minutes <= 0 or keys_per_second <= 0:
        fail("--minutes and --keys-per-second must be positive")
    try:
        result = run(model, minutes * 60, keys_per_second, changing=changing_workspace)
    except RuntimeError as exc:
        fail(str(exc))
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    typer.echo(table(result))
