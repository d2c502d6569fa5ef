"""Benchmarks of the model and the engine: ``selftest``, ``bench quality``, ``engine``, ``dial``,
``latency``, ``tune``, ``compare``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from celeris_complete.cli.app import (
    ApiKeyEnvOption,
    ApiOption,
    BackendOption,
    DeviceOption,
    EndpointOption,
    JsonOutputOption,
    KeysPerSecondOption,
    ModelOption,
    QuantOption,
    StepsOption,
    ThreadsOption,
    TrustOption,
    app,
    bench_app,
    fail,
)
from celeris_complete.errors import CelerisError


@app.command()
def selftest(
    model: ModelOption = None,
    budget_ms: Annotated[Optional[float], typer.Option(help="Keystroke budget in ms (default 100).")] = None,
    steps: StepsOption = None,
    device: DeviceOption = None,
    backend: BackendOption = None,
    quant: QuantOption = None,
    threads: ThreadsOption = None,
    requests: Annotated[int, typer.Option(help="Places in files to complete at.")] = 24,
    endpoint: EndpointOption = None,
    api: ApiOption = None,
    api_key_env: ApiKeyEnvOption = None,
    escalate_endpoint: Annotated[
        Optional[str], typer.Option(help="A second tier, asked where the local answer is below min_confidence.")
    ] = None,
    escalate_api: Annotated[Optional[str], typer.Option(help="The second tier's API: fim, completions, chat.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    trust_remote_code: TrustOption = False,
) -> None:
    """Measure completion latency on this machine against the keystroke budget; say what to change; and
    which tier answers (with a second one configured, how it answers where the local answer is unsure)."""

    from celeris_complete.bench.selftest import render, run_selftest
    from celeris_complete.config import load_settings
    from celeris_complete.engine import Engine

    overrides = dict(
        model=model,
        budget_ms=budget_ms,
        steps=steps,
        device=device,
        backend=backend,
        quant=quant,
        threads=threads,
        trust_remote_code=trust_remote_code or None,
        endpoint=endpoint,
        api=api,
        api_key_env=api_key_env,
        escalate_endpoint=escalate_endpoint,
        escalate_api=escalate_api,
    )
    try:
        settings = load_settings(overrides)
        engine = Engine(settings)
    except CelerisError as exc:
        fail(str(exc))
    try:
        result = run_selftest(engine, settings.budget_ms, requests=requests)
    except CelerisError as exc:  # a remote endpoint that fails
        fail(str(exc))
    typer.echo(json.dumps(result, indent=2) if as_json else render(result))
    if result["verdict"] != "pass":
        raise typer.Exit(1)


@bench_app.command("quality")
def bench_quality(
    task_set: Annotated[str, typer.Option("--set", help="single or multi (HumanEval-Infilling).")] = "single",
    limit: Annotated[Optional[int], typer.Option(help="Quick subset: this many tasks, spread evenly.")] = None,
    model: ModelOption = None,
    steps: StepsOption = None,
    threshold: Annotated[Optional[float], typer.Option()] = None,
    eos_penalty: Annotated[Optional[float], typer.Option(help="End-of-span penalty (both modes).")] = None,
    canvas: Annotated[Optional[int], typer.Option(help="Canvas slots (line or block mode).")] = None,
    quant: Annotated[Optional[str], typer.Option(help="none or int8.")] = None,
    device: Annotated[Optional[str], typer.Option()] = None,
    workers: Annotated[int, typer.Option(help="Programs executed in parallel.")] = 2,
    output: Annotated[Optional[Path], typer.Option(help="Write the full JSON result here.")] = None,
    plot: Annotated[
        Optional[Path], typer.Option(help="The answers' reliability diagram and precision/coverage curve (PNG).")
    ] = None,
) -> None:
    """HumanEval-Infilling pass@1 (executed in sandboxed subprocesses), exact match, edit similarity, and
    what staying quiet below the confidence threshold would show (right = exact)."""

    from celeris_complete.bench.quality import evaluate
    from celeris_complete.config import load_settings
    from celeris_complete.engine import Engine

    overrides = dict(model=model, steps=steps, threshold=threshold, quant=quant, device=device)
    overrides |= dict(eos_penalty=eos_penalty, eos_penalty_line=eos_penalty)
    if canvas is not None:
        overrides["canvas_line" if task_set == "single" else "canvas_block"] = canvas
    try:
        settings = load_settings(overrides)
        engine = Engine(settings)
        result = evaluate(engine, task_set, limit, workers, progress=lambda m: typer.echo(m, err=True))
    except CelerisError as exc:
        fail(str(exc))
    keys = (
        "steps",
        "threshold",
        "eos_penalty",
        "eos_penalty_line",
        "canvas_line",
        "canvas_block",
        "prefix_tokens",
        "quant",
        "device",
    )
    result["settings"] = {k: engine.settings.values[k] for k in keys}  # as used, with the model's recommendations
    result["settings"]["quant"] = engine.quant  # auto resolved
    result["model"] = str(engine.path)
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if plot:
        from celeris_complete.cli.bench_load import plot_confidence

        plot_confidence(plot, result["results"], f"HumanEval-Infilling {task_set}")
    summary = {k: v for k, v in result.items() if k != "results"}
    typer.echo(json.dumps(summary, indent=2))


@bench_app.command("engine")
def bench_engine(
    configs: Annotated[
        Optional[str],
        typer.Option(help="Comma-separated backend:quant pairs (default: fp32 and int8 of both, bf16 where AMX)."),
    ] = None,
    model: ModelOption = None,
    requests: Annotated[int, typer.Option(help="Places in files per configuration.")] = 24,
    samples: Annotated[int, typer.Option(help="Held-out spans for exact match.")] = 200,
    threads: ThreadsOption = None,
    output: Annotated[Optional[Path], typer.Option(help="Write the full JSON here.")] = None,
) -> None:
    """Latency (cached and not), tokens/s, speedup over one token per step, exact match and peak memory
    for each backend and quantization, each in a fresh process; prints a Markdown table."""
    from celeris_complete.bench.engine import default_configs, run_all, save, table

    chosen = [c.strip() for c in configs.split(",") if c.strip()] if configs else default_configs()
    rows = run_all(chosen, model, requests, samples, threads)
    if output:
        save(rows, output)
    typer.echo(table(rows))


def _dial_rows(model: str | None, steps: str, samples: int, requests: int) -> list[dict]:
    """The steps dial's rows (bench dial and bench latency)."""
    from celeris_complete.bench.dial import sweep
    from celeris_complete.config import load_settings
    from celeris_complete.engine import Engine

    try:
        engine = Engine(load_settings(dict(model=model)))
        return sweep(engine, [int(s) for s in steps.split(",") if s.strip()], samples, requests)
    except (CelerisError, ValueError) as exc:
        fail(str(exc))


@bench_app.command("dial")
def bench_dial(
    model: ModelOption = None,
    steps: Annotated[str, typer.Option(help="Comma-separated step counts.")] = "1,2,3,4,8,16",
    samples: Annotated[int, typer.Option(help="Held-out spans per setting.")] = 150,
    requests: Annotated[int, typer.Option(help="Places in files per setting (latency).")] = 12,
    plot: Annotated[Optional[Path], typer.Option(help="Write a PNG plot here (needs matplotlib).")] = None,
    output: JsonOutputOption = None,
) -> None:
    """The latency/quality dial: exact match on held-out spans and keystroke latency per step count."""

    from celeris_complete.bench.dial import plot as draw
    from celeris_complete.bench.dial import table

    rows = _dial_rows(model, steps, samples, requests)
    if output:
        output.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    if plot:
        try:
            draw(rows, plot)
        except ImportError:
            fail("the plot needs matplotlib: pip install -e '.[bench]'")
    typer.echo(table(rows))


@bench_app.command("latency")
def bench_latency(
    model: ModelOption = None,
    seconds: Annotated[float, typer.Option(help="How long to type into the server.")] = 60.0,
    keys_per_second: KeysPerSecondOption = 20.0,
    steps: Annotated[str, typer.Option(help="Comma-separated step counts for the dial.")] = "1,2,3,4,8,16",
    samples: Annotated[int, typer.Option(help="Held-out spans per step count.")] = 150,
    requests: Annotated[int, typer.Option(help="Places in files per step count.")] = 12,
    output_dir: Annotated[Path, typer.Option(help="Where latency.json, latency.md and dial.png go.")] = Path("."),
) -> None:
    """Speed, both levels: real files typed into the language server (client-observed percentiles, cache
    hits), and the engine's steps dial (latency, quality, speedup over one token per step) with a plot."""

    from celeris_complete.bench.dial import plot as draw
    from celeris_complete.bench.dial import table
    from celeris_complete.bench.lsp import run

    try:
        server = run(model, seconds, keys_per_second, {})
    except RuntimeError as exc:
        fail(str(exc))
    dial = _dial_rows(model, steps, samples, requests)
    output_dir.mkdir(parents=True, exist_ok=True)
    lat = server["latency_ms"]
    lines = [
        f"Language server, {server['keystrokes']} keystrokes at {keys_per_second:g} keys/s: client-observed "
        f"p50 {lat['p50']} ms, p95 {lat['p95']} ms, p99 {lat['p99']} ms; "
        f"{server['answered_before_next_key']:.1%} answered before the next key; "
        f"typing-cache hit rate {server['typing_cache_hit_rate']:.1%}; context cache {server['context_cache']}",
        "",
        table(dial),
    ]
    (output_dir / "latency.json").write_text(json.dumps({"server": server, "dial": dial}, indent=1) + "\n")
    (output_dir / "latency.md").write_text("\n".join(lines) + "\n")
    try:
        draw(dial, output_dir / "dial.png")
    except ImportError:
        typer.echo("(no plot: pip install -e '.[bench]' for matplotlib)", err=True)
    typer.echo("\n".join(lines))


@bench_app.command("tune")
def bench_tune(
    model: ModelOption = None,
    limit: Annotated[Optional[int], typer.Option(help="Tasks per point (default: all 1,033).")] = None,
    budget_ms: Annotated[Optional[float], typer.Option(help="Latency budget for p95 (default: budget_ms).")] = None,
    keystroke_p50_ms: Annotated[float, typer.Option(help="Budget for the keystroke p50.")] = 25.0,
    reuse: Annotated[Optional[Path], typer.Option(help="Quality figures from an earlier run's JSON.")] = None,
    workers: Annotated[int, typer.Option(help="Programs executed in parallel.")] = 2,
    output: JsonOutputOption = None,
) -> None:
    """Pick steps, threshold, canvas length and context budget by single-line pass@1 inside the budget."""

    from celeris_complete.bench.tune import sweep, table
    from celeris_complete.config import load_settings
    from celeris_complete.engine import Engine

    try:
        engine = Engine(load_settings(dict(model=model)))
        earlier = json.loads(reuse.read_text(encoding="utf-8"))["rows"] if reuse else None
        result = sweep(
            engine,
            limit,
            workers,
            budget_ms,
            progress=lambda m: typer.echo(m, err=True),
            keystroke_p50_ms=keystroke_p50_ms,
            reuse=earlier,
        )
    except (CelerisError, OSError, KeyError, ValueError) as exc:
        fail(str(exc))
    result["model"] = str(engine.path)
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    typer.echo(table(result["rows"]))
    typer.echo(
        f"chosen (keystroke p50 <= {result['keystroke_p50_ms']} ms, p95 <= {result['budget_ms']} ms): "
        + json.dumps(result["chosen"])
        + ("" if result["inside_budget"] else "  (nothing measured was inside the budget: the best of the rest)")
    )


@bench_app.command("compare")
def bench_compare(
    run_a: Annotated[Path, typer.Argument(help="A `bench repo` or `bench quality` --output file.")],
    run_b: Annotated[Path, typer.Argument(help="The same benchmark's run on the same sites.")],
    identical: Annotated[
        bool, typer.Option("--identical", help="Fail (exit 1) unless every answer is the same text.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Two runs of `bench repo` or `bench quality` compared site by site (B minus A)."""

    from celeris_complete.bench.compare import compare_files, render

    try:
        report = compare_files(run_a, run_b)
    except CelerisError as exc:
        fail(str(exc))
    typer.echo(json.dumps(report, indent=2) if as_json else render(report))
    if identical and report["identical_answers"] != report["sites"]:
        raise typer.Exit(1)


@bench_app.command("engine-one", hidden=True)
def bench_engine_one(
    backend: Annotated[str, typer.Option()] = "torch",
    quant: Annotated[str, typer.Option()] = "none",
    model: Annotated[Optional[str], typer.Option()] = None,
    requests: Annotated[int, typer.Option()] = 24,
    samples: Annotated[int, typer.Option()] = 200,
    threads: Annotated[Optional[int], typer.Option()] = None,
) -> None:

    from celeris_complete.bench.engine import measure
    from celeris_complete.config import load_settings

    try:
        settings = load_settings(dict(backend=backend, quant=quant, model=model, threads=threads))
        typer.echo(json.dumps(measure(settings, requests, samples)))
    except CelerisError as exc:
        fail(str(exc))
