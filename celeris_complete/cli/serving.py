"""Commands that serve completions: ``lsp`` (the language server) and ``serve`` (HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from celeris_complete.cli.app import (
    BackendOption,
    DeviceOption,
    ModelOption,
    QuantOption,
    ThreadsOption,
    TrustOption,
    app,
    fail,
)
from celeris_complete.errors import CelerisError


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

    from celeris_complete.config import load_settings

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
        from celeris_complete.serve.access import api_key_from
        from celeris_complete.serve.app import run
        from celeris_complete.serve.server import ServeOptions
    except ImportError as exc:
        fail(f"serve needs the server packages ({exc.name} is missing): pip install -e '.[serve]'")
    from celeris_complete.config import load_settings

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
        from celeris_complete.serve.ray_serve import RayOptions
        from celeris_complete.serve.ray_serve import run as run_ray
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
