"""The ``celeris-complete`` command line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import CelerisError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Local code completion with a diffusion model.")


@app.callback()
def _root() -> None:
    """Local code completion with a masked-diffusion model."""


TRUST_HELP = "Let a transformers model directory run its own Python code (only for a directory you trust)."
# The remote backend's options, shared by the commands that complete (infill, selftest).
EndpointOption = Annotated[
    Optional[str], typer.Option(help="Complete through this server (celeris-complete serve, or OpenAI-compatible).")
]
ApiOption = Annotated[Optional[str], typer.Option(help="The endpoint's API: fim or completions.")]
ApiKeyEnvOption = Annotated[Optional[str], typer.Option(help="Environment variable holding the endpoint's API key.")]
# Options that many commands share.
ModelOption = Annotated[Optional[str], typer.Option(help="Model directory.")]
BackendOption = Annotated[Optional[str], typer.Option(help="auto, torch or onnx.")]
TrustOption = Annotated[bool, typer.Option("--trust-remote-code", help=TRUST_HELP)]
StepsOption = Annotated[Optional[int], typer.Option(help="Refinement steps.")]
QuantOption = Annotated[Optional[str], typer.Option(help="auto, none, int8 (CPU), bf16 (AMX, CUDA), fp16 (CUDA).")]
JsonOutputOption = Annotated[Optional[Path], typer.Option(help="Write the JSON here.")]
ThreadsOption = Annotated[Optional[int], typer.Option(help="CPU threads (0: all).")]
KeysPerSecondOption = Annotated[float, typer.Option(help="Typing speed.")]
DeviceOption = Annotated[Optional[str], typer.Option(help="auto, cpu or cuda.")]


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"celeris-complete: error: {message}", err=True)
    raise typer.Exit(code)


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
    from . import corpus as corpus_mod
    from .train import PRESETS, TrainArgs
    from .train import train as run_train

    if preset not in PRESETS:
        fail(f"--preset must be one of {', '.join(PRESETS)}")
    if device not in ("auto", "cpu", "cuda"):
        fail("--device must be auto, cpu or cuda")
    if precision not in ("auto", "fp32", "bf16"):
        fail("--precision must be auto, fp32 or bf16")
    roots = list(corpus) if corpus else corpus_mod.default_roots()
    sources = []
    if packages:
        from .corpus_packages import fetch_sources

        try:
            fetched = fetch_sources(progress=lambda m: typer.echo(m, err=True))
        except CelerisError as exc:
            fail(str(exc))
        sources = [{"package": "python-stdlib", "root": str(r), "name": r.name} for r in roots]
        sources += [s.row() for s in fetched]
        roots += [s.root for s in fetched]
    args = TrainArgs(
        output=output,
        roots=roots,
        sources=sources,
        excludes=corpus_mod.DEFAULT_EXCLUDES + tuple(exclude or ()),
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
        from .distributed import exit_after_group

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
    lr: Annotated[Optional[float], typer.Option(help="Peak learning rate (default 5e-4).")] = None,
) -> None:
    """Train a copy of the model on the workspace's own Python files (at low priority; resumable), then
    compare it with the model it started from on held-out workspace files; the result goes under the
    user's cache, never inside the workspace."""
    from .adapt import CHECK_FILE
    from .adapt import adapt as run_adapt
    from .config import load_settings
    from .parent_watch import exit_with_parent

    if parent_pid:  # started by the language server: its checkpoint stays for the next start
        exit_with_parent(parent_pid, code=3, direct=True)
    try:
        overrides = {"model": model} if model else {}
        if memory_mb is not None:
            overrides["adapt_memory_mb"] = memory_mb
        settings = load_settings(overrides)
        if lr is not None and not lr > 0:
            fail("--lr must be above 0")
        out = run_adapt(workspace, settings, minutes, fresh=fresh, **({"lr": lr} if lr is not None else {}))
        verdict = json.loads((out / CHECK_FILE).read_text(encoding="utf-8"))
    except CelerisError as exc:
        fail(str(exc))
    base, adapted = verdict["base"]["content_acc"], verdict["adapted"]["content_acc"]
    typer.echo(f"held-out workspace files, masked-token accuracy: base {base}, adapted {adapted}")
    if verdict["passed"]:
        typer.echo(f"adapted model written to {out} (use it with --model {out} or the setting model)")
    else:
        typer.echo(f"adapted model written to {out}, but it is not better than the base model on held-out files")


@app.command("corpus")
def corpus_command(
    packages: Annotated[bool, typer.Option("--packages", help="Include the pinned packages (downloads them).")] = False,
) -> None:
    """The training corpus, per source: files kept, bytes, licence (what `train --packages` reads)."""
    from collections import Counter

    from . import corpus as corpus_mod
    from .corpus_packages import fetch_sources

    rows = [("python-stdlib", "", "PSF-2.0", r) for r in corpus_mod.default_roots()]
    try:
        if packages:
            rows += [(s.package, s.version, s.licence, s.root) for s in fetch_sources()]
        files = corpus_mod.gather([r[3] for r in rows])
    except CelerisError as exc:
        fail(str(exc))
    count, size = Counter(), Counter()
    for f in files:
        top = f.relpath.split("/", 1)[0]
        count[top] += 1
        size[top] += len(f.text)
    for package, version, licence, root in rows:
        typer.echo(f"{package:18} {version:10} {count[root.name]:6} files {size[root.name] / 1e6:8.2f} MB  {licence}")
    typer.echo(f"{'total':29} {len(files):6} files {sum(size.values()) / 1e6:8.2f} MB")


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

    from .model_dir import default_model_dir
    from .validation import validate_model_dir

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


@app.command()
def lsp(
    tcp: Annotated[bool, typer.Option("--tcp", help="Listen on TCP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="TCP address (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 2087,
    model: ModelOption = None,
    log_file: Annotated[Optional[Path], typer.Option(help="Write the server's log here.")] = None,
    trust_remote_code: TrustOption = False,
) -> None:
    """Start the language server (stdio by default)."""
    import logging

    from .config import load_settings

    logging.basicConfig(
        filename=str(log_file) if log_file else None,
        level=logging.INFO if log_file else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        settings = load_settings(dict(model=model, trust_remote_code=trust_remote_code or None))
    except CelerisError as exc:
        fail(str(exc))
    from celeris_lsp.server import serve

    serve(settings, tcp=tcp, host=host, port=port)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default; any other needs an API key).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int,
        typer.Option(
            help="TCP port; 0: a free one the system picks. Once the server accepts connections it prints one "
            "line on stdout, `listening on http://HOST:PORT`, with the port it got (with --ray: once the "
            "replicas are serving)."
        ),
    ] = 8000,
    model: ModelOption = None,
    model_name: Annotated[
        Optional[str], typer.Option(help="The model id clients send and /v1/models lists (default celeris-DIRNAME).")
    ] = None,
    api_key_env: Annotated[
        Optional[str], typer.Option(help="Require this environment variable's value as bearer token.")
    ] = None,
    api_key_file: Annotated[Optional[Path], typer.Option(help="Require this file's content as bearer token.")] = None,
    max_queue: Annotated[int, typer.Option(help="Requests that may wait for the model; more are answered 429.")] = 64,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body accepted (413 above).")] = 1 << 20,
    max_deadline_ms: Annotated[
        float, typer.Option(help="Longest deadline a request may ask for; also the deadline of those that ask none.")
    ] = 10_000.0,
    max_n: Annotated[int, typer.Option(help="Most completions one request may ask for (n).")] = 8,
    batch: Annotated[
        Optional[bool],
        typer.Option(
            "--batch/--no-batch",
            help="Decode the requests together, one forward pass per step (default: yes, but one at a time for "
            "an int8 model on the CPU, where that measured as fast or faster).",
        ),
    ] = None,
    max_batch: Annotated[int, typer.Option(help="Most canvases in one batch (a request with n choices has n).")] = 16,
    device: DeviceOption = None,
    backend: BackendOption = None,
    quant: QuantOption = None,
    threads: ThreadsOption = None,
    log_level: Annotated[str, typer.Option(help="critical, error, warning, info or debug.")] = "info",
    trust_remote_code: TrustOption = False,
    ray: Annotated[
        bool, typer.Option("--ray", help="Serve from replicas of a Ray Serve deployment (pip install -e '.[ray]').")
    ] = False,
    replicas: Annotated[int, typer.Option(help="--ray: a fixed number of replicas.")] = 1,
    min_replicas: Annotated[
        Optional[int], typer.Option(help="--ray: autoscale between this (default 1; 0 scales to zero) and the max.")
    ] = None,
    max_replicas: Annotated[Optional[int], typer.Option(help="--ray: autoscale up to this many replicas.")] = None,
    target_ongoing_requests: Annotated[
        float, typer.Option(help="--ray: the autoscaler's target of requests running and queued per replica.")
    ] = 2.0,
    cpus_per_replica: Annotated[
        float, typer.Option(help="--ray: CPUs Ray reserves for each replica (its torch threads unless --threads).")
    ] = 1.0,
    ray_address: Annotated[
        Optional[str], typer.Option(help="--ray: join this Ray cluster ('auto', HOST:PORT); default: a local one.")
    ] = None,
    ray_num_cpus: Annotated[
        Optional[int], typer.Option(help="--ray: CPUs of the local Ray instance (default all).")
    ] = None,
) -> None:
    """Serve completions over HTTP: /v1/fim/completions, /v1/completions, /v1/models, /health, /metrics."""
    import logging

    try:
        from .serve import ServeOptions, api_key_from, run
    except ImportError as exc:
        fail(f"serve needs the server packages ({exc.name} is missing): pip install -e '.[serve]'")
    from .config import load_settings

    levels = ("critical", "error", "warning", "info", "debug")
    if log_level not in levels:
        fail(f"--log-level must be one of {', '.join(levels)}")
    if not 0 <= port < 65536:
        fail("--port must be between 0 (a free port) and 65535")
    if ray and port == 0 and ray_address is not None:
        fail("--port 0 is for a local Ray instance (a cluster's proxies bind the port on every node)")
    if max_queue < 1 or max_n < 1 or max_body_bytes < 1 or max_deadline_ms <= 0:
        fail("--max-queue, --max-n, --max-body-bytes and --max-deadline-ms must be positive")
    if not 1 <= max_batch <= 256:
        fail("--max-batch must be between 1 and 256")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    overrides = dict(
        model=model, device=device, backend=backend, quant=quant, threads=threads,
        trust_remote_code=trust_remote_code or None,
        endpoint="",  # the server runs the model itself, whatever the user's files say for their editors
    )  # fmt: skip
    try:
        key = api_key_from(host, api_key_env, api_key_file)
        settings = load_settings(overrides)
    except CelerisError as exc:
        fail(str(exc))
    options = ServeOptions(
        max_queue=max_queue, max_body_bytes=max_body_bytes, max_deadline_ms=max_deadline_ms, max_n=max_n,
        batch=batch, max_batch=max_batch, model_name=model_name, api_key=key,
    )  # fmt: skip
    if not ray:
        if (replicas, min_replicas, max_replicas, target_ongoing_requests, cpus_per_replica, ray_address,
                ray_num_cpus) != (1, None, None, 2.0, 1.0, None, None):  # fmt: skip
            fail("--replicas, --min/--max-replicas, --target-ongoing-requests, --cpus-per-replica, --ray-address "
                 "and --ray-num-cpus need --ray")  # fmt: skip
        run(settings, options, host, port, log_level)
        return
    try:
        from .serve_ray import RayOptions
        from .serve_ray import run as run_ray
    except ImportError as exc:
        fail(f"serve --ray needs Ray Serve ({exc.name} is missing): pip install -e '.[ray]'")
    ray_options = RayOptions(
        replicas=replicas, min_replicas=min_replicas, max_replicas=max_replicas,
        target_ongoing_requests=target_ongoing_requests, cpus_per_replica=cpus_per_replica, address=ray_address,
        num_cpus=ray_num_cpus,
    )  # fmt: skip
    try:
        ray_options.check()
    except CelerisError as exc:
        fail(str(exc))
    try:
        run_ray(settings, options, ray_options, host, port, log_level)
    except CelerisError as exc:
        fail(str(exc))


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
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    trust_remote_code: TrustOption = False,
) -> None:
    """Measure completion latency on this machine against the keystroke budget; say what to change."""
    import json

    from .config import load_settings
    from .engine import Engine
    from .selftest import render, run_selftest

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


bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print numbers.")
app.add_typer(bench_app, name="bench")


def server_options(options: dict, setting: Optional[list[str]]) -> dict:
    """A benchmark's server settings: ``options`` (None: the default) and ``--set KEY=VALUE`` items, checked
    here (the server would only warn about a bad value and go on)."""
    from .config import coerce

    options = {k: v for k, v in options.items() if v is not None}
    for item in setting or ():
        key, sep, value = item.partition("=")
        if not sep:
            fail(f"--set {item}: give KEY=VALUE")
        options[key.strip()] = value.strip()
    try:
        return {key: coerce(key, value, "command line") for key, value in options.items()}
    except CelerisError as exc:
        fail(str(exc))
        raise


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
) -> None:
    """HumanEval-Infilling pass@1 (executed in sandboxed subprocesses), exact match, edit similarity."""
    import json

    from .bench_quality import evaluate
    from .config import load_settings
    from .engine import Engine

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
    from .bench_engine import default_configs, run_all, save, table

    chosen = [c.strip() for c in configs.split(",") if c.strip()] if configs else default_configs()
    rows = run_all(chosen, model, requests, samples, threads)
    if output:
        save(rows, output)
    typer.echo(table(rows))


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
    setting: Annotated[
        Optional[list[str]], typer.Option("--set", help="Any other server setting, KEY=VALUE (repeatable).")
    ] = None,
    output: JsonOutputOption = None,
) -> None:
    """Type real files into the real language server over stdio; client-observed latency and memory
    (and, with --invoked-every, the latency of invoked requests with alternatives)."""
    import json

    from .bench_lsp import run

    if invoked_every < 0 or think_s < 0:
        fail("--invoked-every and --think-s must be 0 or more")
    options = server_options(dict(quant=quant, backend=backend, alternatives=alternatives), setting)
    try:
        result = run(model, seconds, keys_per_second, options, invoked_every, think_s)
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
    steps: StepsOption = None,
    quant: QuantOption = None,
    backend: BackendOption = None,
    budget_ms: Annotated[Optional[float], typer.Option(help="The server's decoding deadline (default 100).")] = None,
    setting: Annotated[
        Optional[list[str]], typer.Option("--set", help="Any other server setting, KEY=VALUE (repeatable).")
    ] = None,
    output: Annotated[Optional[Path], typer.Option(help="Write the full JSON (every site) here.")] = None,
    invoked: Annotated[
        bool,
        typer.Option(
            "--invoked", help="Requests as a user makes them (with the server's alternatives): one item exact too."
        ),
    ] = False,
) -> None:
    """Complete lines in real Python packages the model never saw (pinned versions, downloaded with pip
    into a cache) through the real language server: exact match, edit similarity, empty answers, latency."""
    import json

    from .bench_repo import PACKAGES, run, table, without_sites

    pinned = dict(PACKAGES)
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
        )
    except (CelerisError, RuntimeError) as exc:
        fail(str(exc))
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    typer.echo(table(result))
    typer.echo(json.dumps(without_sites(result), indent=2))


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
) -> None:
    """The lift of adapting the model to a repository: for each bench repo package, adapt a copy of the
    model on 80% of its files for --minutes (celeris-complete adapt), then complete lines in the other 20%
    with the base and the adapted model through the real language server: exact match, edit similarity."""
    from .bench_adapt import run, table, without_sites
    from .bench_repo import PACKAGES

    pinned = dict(PACKAGES)
    chosen = [p.strip() for p in packages.split(",") if p.strip()] if packages else list(pinned)
    unknown = [p for p in chosen if p not in pinned]
    if unknown:
        fail(f"unknown package(s) {', '.join(unknown)}: choose from {', '.join(pinned)}")
    if sites < 1 or files < 1 or minutes <= 0 or (lr is not None and not lr > 0):
        fail("--sites and --files must be at least 1, --minutes and --lr above 0")
    options = server_options(dict(budget_ms=budget_ms), setting)
    for key in ("model", "drafts"):
        if key in options:
            fail(f"--set {key}: bench adapt sets it itself (--model, --drafts-off)")

    def save(result: dict) -> None:  # after each package: an interrupted run keeps what it measured
        if output:
            output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    try:
        result = run(
            [(p, pinned[p]) for p in chosen], minutes, model, sites, files, seed, options, drafts_off, keep_adapted,
            progress=lambda m: typer.echo(m, err=True), partial=save, lr=lr,
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
        from .bench_serve import run, table
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
            from .bench_locust import run as run_locust

            result = run_locust(levels, seconds, url, model, key, **server)
        else:
            result = run(levels, seconds, url, model, key, typing=typing, **server)
    except RuntimeError as exc:
        fail(str(exc))
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if locust:
        from .bench_locust import table as locust_table

        typer.echo(locust_table(result))
    else:
        typer.echo(table(result))


def _dial_rows(model: str | None, steps: str, samples: int, requests: int) -> list[dict]:
    """The steps dial's rows (bench dial and bench latency)."""
    from .bench_dial import sweep
    from .config import load_settings
    from .engine import Engine

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
    import json

    from .bench_dial import plot as draw
    from .bench_dial import table

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
    import json

    from .bench_dial import plot as draw
    from .bench_dial import table
    from .bench_lsp import run

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

    from .bench_soak import run, table

    if minutes <= 0 or keys_per_second <= 0:
        fail("--minutes and --keys-per-second must be positive")
    try:
        result = run(model, minutes * 60, keys_per_second, changing=changing_workspace)
    except RuntimeError as exc:
        fail(str(exc))
    if output:
        output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    typer.echo(table(result))


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
    import json

    from .bench_tune import sweep, table
    from .config import load_settings
    from .engine import Engine

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


@bench_app.command("engine-one", hidden=True)
def bench_engine_one(
    backend: Annotated[str, typer.Option()] = "torch",
    quant: Annotated[str, typer.Option()] = "none",
    model: Annotated[Optional[str], typer.Option()] = None,
    requests: Annotated[int, typer.Option()] = 24,
    samples: Annotated[int, typer.Option()] = 200,
    threads: Annotated[Optional[int], typer.Option()] = None,
) -> None:
    import json

    from .bench_engine import measure
    from .config import load_settings

    try:
        settings = load_settings(dict(backend=backend, quant=quant, model=model, threads=threads))
        typer.echo(json.dumps(measure(settings, requests, samples)))
    except CelerisError as exc:
        fail(str(exc))


def read_source(target: str) -> tuple[str, Path | None]:
    """The text of FILE (or stdin for "-"), refusing binary or undecodable input clearly."""
    if target == "-":
        data = sys.stdin.buffer.read()
        path = None
        name = "standard input"
    else:
        path = Path(target)
        name = str(path)
        if not path.is_file():
            fail(f"{name}: no such file")
        try:
            data = path.read_bytes()
        except OSError as exc:
            fail(f"{name}: cannot be read ({exc.strerror})")
    if b"\0" in data[:8192]:
        fail(f"{name}: looks like a binary file (it holds NUL bytes); refusing to complete it")
    try:
        return data.decode("utf-8"), path
    except UnicodeDecodeError as exc:
        fail(
            f"{name}: not valid UTF-8 (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); refusing to complete it"
        )
    raise AssertionError  # unreachable


def split_target(target: str) -> tuple[str, int | None, int | None]:
    """FILE:LINE:COL -> (FILE, LINE, COL) when FILE itself does not exist under that name."""
    parts = target.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit() and not Path(target).exists():
        return parts[0], int(parts[1]), int(parts[2])
    return target, None, None


def offset_of(text: str, line: int, col: int) -> int:
    """Character offset of 1-based LINE and COL (COL in characters, one past the end allowed)."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        fail(f"line {line} is out of range: the text has {len(lines)} lines")
    current = lines[line - 1].rstrip("\r")
    if not 1 <= col <= len(current) + 1:
        fail(f"column {col} is out of range: line {line} has {len(current)} characters")
    return sum(len(ln) + 1 for ln in lines[: line - 1]) + col - 1


@app.command()
def infill(
    target: Annotated[str, typer.Argument(help="FILE, FILE:LINE:COL, or - for standard input.")],
    line: Annotated[Optional[int], typer.Option("--line", "-l", help="1-based line of the cursor.")] = None,
    col: Annotated[Optional[int], typer.Option("--col", "-c", help="1-based column (characters).")] = None,
    model: ModelOption = None,
    mode: Annotated[Optional[str], typer.Option(help="auto, line or block.")] = None,
    steps: StepsOption = None,
    threshold: Annotated[Optional[float], typer.Option(help="Confidence threshold.")] = None,
    eos_penalty: Annotated[Optional[float], typer.Option(help="End-of-span penalty (both modes).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help="Canvas slots (completion length cap).")] = None,
    device: DeviceOption = None,
    backend: BackendOption = None,
    quant: QuantOption = None,
    marker: Annotated[Optional[str], typer.Option(help="Hole marker to fill (default <FILL>).")] = None,
    endpoint: EndpointOption = None,
    api: ApiOption = None,
    api_key_env: ApiKeyEnvOption = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Write the filled file back (FILE~ keeps the original).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON with timings.")] = False,
    trust_remote_code: TrustOption = False,
) -> None:
    """Fill the hole at the cursor, or every marker in a file, with the model."""
    import json

    from .config import load_settings
    from .engine import Engine

    path_str, t_line, t_col = split_target(target)
    line, col = line or t_line, col or t_col
    if (line is None) != (col is None):
        fail("give both --line and --col (or FILE:LINE:COL)")
    overrides = dict(
        model=model,
        mode=mode,
        steps=steps,
        threshold=threshold,
        eos_penalty=eos_penalty,
        eos_penalty_line=eos_penalty,
        device=device,
        backend=backend,
        quant=quant,
        fill_marker=marker,
        trust_remote_code=trust_remote_code or None,
        endpoint=endpoint,
        api=api,
        api_key_env=api_key_env,
    )
    try:
        settings = load_settings(overrides)
        if settings.source("trace") == "default":  # one-shot: tracing (about a second) would cost more than it saves
            settings = settings.with_overrides({"trace": False}, "infill")
        text, path = read_source(path_str)
        engine = Engine(settings)
    except CelerisError as exc:
        fail(str(exc))
    newline = "\r\n" if "\r\n" in text else "\n"
    language = "python" if path_str == "-" else path_str  # a .py file's answers are checked by the parser
    notice = getattr(engine.impl, "announcement", lambda: None)()
    if notice:
        typer.echo(notice, err=True)

    def run(prefix: str, suffix: str):
        try:
            done = engine.complete(prefix, suffix, max_tokens=max_tokens, language=language)
        except CelerisError as exc:  # a remote endpoint that fails
            fail(str(exc))
        return done, done.text.replace("\n", newline) if newline != "\n" else done.text

    if line is not None:
        cursor = offset_of(text, line, col)
        done, completion = run(text[:cursor], text[cursor:])
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "completion": completion,
                        "mode": done.mode,
                        "steps": done.steps,
                        "tokens": done.tokens,
                        "timings_ms": done.timings_ms,
                    }
                )
            )
        else:
            typer.echo(completion)
        return
    hole = settings.fill_marker
    if hole not in text:
        fail(f"no {hole} marker in {path or 'standard input'}; give a position with --line/--col or FILE:LINE:COL")
    pieces = text.split(hole)
    results = []
    filled = pieces[0]
    for i in range(1, len(pieces)):
        suffix = "".join(pieces[i:])  # later holes stay empty in the suffix
        done, completion = run(filled, suffix)
        results.append(
            {
                "completion": completion,
                "mode": done.mode,
                "steps": done.steps,
                "tokens": done.tokens,
                "timings_ms": done.timings_ms,
            }
        )
        filled += completion + pieces[i]
    if as_json:
        typer.echo(json.dumps({"holes": results}))
    elif in_place and path is not None:
        from .safe_write import replace_file

        backup = path.with_name(path.name + "~")
        try:
            replace_file(path, text.encode("utf-8"), filled.encode("utf-8"), backup)
        except CelerisError as exc:
            fail(str(exc))
        typer.echo(f"filled {len(results)} hole(s) in {path} (original kept as {backup})", err=True)
    else:
        sys.stdout.write(filled)
        sys.stdout.flush()
    for i, r in enumerate(results, 1):
        t = r["timings_ms"]
        typer.echo(
            f"hole {i}: {r['mode']} mode, {r['tokens']} tokens, {r['steps']} steps, "
            f"{t['total']:.1f} ms (context {t['context_encode']:.1f}, refine {t['refine']:.1f})",
            err=True,
        )


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
