"""``celeris-complete serve --ray``: the HTTP server of serve.py as replicas of a Ray Serve deployment.

Each replica is one process that loads the model itself from its local path (the same directory must
exist on every node) and runs serve.py's Starlette app unchanged, so the endpoints, request and
response bodies, errors, ``Server-Timing``, streaming, the API key and the body and deadline limits
are those of the plain server.  Ray Serve's HTTP proxy receives the requests and hands each to the
replica with the fewest ongoing requests of two drawn at random; with autoscaling it adds replicas
while the ongoing requests per replica stay above the target and removes them when the load falls.

A replica's own queue holds ``max_queue`` requests besides the one it runs, and a full queue is
answered 429 as in serve.py; Ray's own limits (requests sent to a replica, requests a proxy holds
while it finds one) are set above that, so that they only bound a flood (the proxy's 429 then has
Ray's plain-text body).  A request's deadline counts from its arrival at the replica.  ``/metrics``
and ``/health`` are those of the replica that answers (the header ``x-celeris-replica`` names it);
Ray's own metrics cover the proxy and the autoscaler.

``--port 0`` (a local instance only): the port is chosen by binding port 0 here, and that socket,
bound with ``SO_REUSEPORT`` but never listening, is held until the proxy (which binds with
``SO_REUSEPORT`` too, Ray's default) answers on it, so that none of the processes Ray starts meanwhile
can take it; Ray Serve itself cannot report the port of a proxy told to bind 0.  Once the replicas
serve, the line ``listening on URL`` on stdout names the address, as with the plain server.

Used from Python: ``serve.run(build_app(settings, ServeOptions(), RayOptions(replicas=2)))`` on a
Ray instance that ``ray.init`` started or joined.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import socket
import time
import urllib.request
from dataclasses import dataclass

from ray import serve
from ray.serve.config import BackpressureConfig

from celeris_complete.config import Settings
from celeris_complete.errors import CelerisError
from celeris_complete.serve.app import announce_listening, make_app, url_of
from celeris_complete.serve.server import CompletionServer, ServeOptions

log = logging.getLogger("celeris.serve")

APP_NAME = "celeris"
REPLICA_HEADER = b"x-celeris-replica"


@dataclass(frozen=True)
class RayOptions:
    replicas: int = 1  # a fixed number of replicas, unless max_replicas is set
    min_replicas: int | None = None  # autoscaling between these (min 1 when only max is given)
    max_replicas: int | None = None
    target_ongoing_requests: float = 2.0  # per replica (running and queued): the autoscaler's aim
    cpus_per_replica: float = 1.0  # Ray's CPU reservation; also the replica's torch threads unless --threads
    address: str | None = None  # an existing Ray cluster ("auto", "ray://host:10001"); None: a local instance
    num_cpus: int | None = None  # the CPUs of the local instance (default: all)

    @property
    def autoscaling(self) -> bool:
        return self.max_replicas is not None or self.min_replicas is not None

    def check(self) -> None:
        """CelerisError naming the option when the values cannot work together."""
        if self.replicas < 1:
            raise CelerisError("--replicas must be at least 1")
        if self.autoscaling:
            if self.replicas != 1:
                raise CelerisError("give either --replicas (a fixed number) or --min-replicas/--max-replicas")
            if self.max_replicas is None:
                raise CelerisError("--min-replicas needs --max-replicas (autoscaling between the two)")
            low = 1 if self.min_replicas is None else self.min_replicas
            if low < 0 or self.max_replicas < max(1, low):
                raise CelerisError("--max-replicas must be at least 1 and at least --min-replicas (which is >= 0)")
        if not self.target_ongoing_requests > 0:
            raise CelerisError("--target-ongoing-requests must be positive")
        if not self.cpus_per_replica > 0:
            raise CelerisError("--cpus-per-replica must be positive")
        if self.num_cpus is not None and self.num_cpus < 1:
            raise CelerisError("--ray-num-cpus must be at least 1")
        if self.num_cpus is not None and self.address is not None:
            raise CelerisError("--ray-num-cpus is for a local instance (a cluster's nodes give theirs to `ray start`)")


def deployment_options(ray_options: RayOptions, options: ServeOptions) -> dict:
    """The keyword arguments of ``serve.deployment`` for these options."""
    out: dict = {
        "name": "CompletionReplica",
        "ray_actor_options": {"num_cpus": ray_options.cpus_per_replica},
        # Ray's limits stay above the replica's queue, whose 429 (with the error body of serve.py) is
        # the answer to a full queue: the proxy counts a request as queued until a replica takes it,
        # and with limits as tight as the replica's own it refused bursts that the replicas had room for.
        "max_ongoing_requests": 2 * (options.max_queue + 1),
        "max_queued_requests": 8 * (options.max_queue + 1),
        "backpressure_config": BackpressureConfig(status_code=429, retry_after_s=1),
        "health_check_period_s": 10,
    }
    if ray_options.autoscaling:
        out["autoscaling_config"] = {
            "min_replicas": 1 if ray_options.min_replicas is None else ray_options.min_replicas,
            "max_replicas": ray_options.max_replicas,
            "target_ongoing_requests": ray_options.target_ongoing_requests,
        }
    else:
        out["num_replicas"] = ray_options.replicas
    return out


class ReplicaHeader:
    """ASGI middleware: names the answering replica in a response header."""

    def __init__(self, app, replica: str) -> None:
        self.app = app
        self.value = replica.encode("ascii", "replace")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_named(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), (REPLICA_HEADER, self.value)]}
            await send(message)

        await self.app(scope, receive, send_named)


class CompletionReplica:
    """One replica: the plain server's state and app, with the model loaded before the first request.

    ``values``/``sources`` are the driver's settings as plain dicts (``Settings`` itself does not
    unpickle: its ``__getattr__`` recurses before ``values`` is set).  Ray awaits the async ``__init__``
    (``serve.ingress`` wraps the class); the class is not meant to be built by hand."""

    async def __init__(self, values: dict, sources: dict, options: ServeOptions) -> None:
        self.server = CompletionServer(Settings(values, sources), options)
        await asyncio.to_thread(self.server.load)  # the replica counts as started only once it can answer
        if self.server.load_error:
            raise CelerisError(f"the model failed to load: {self.server.load_error}")
        try:
            self.name = serve.get_replica_context().replica_id.unique_id
        except Exception:  # outside a replica (not expected): the header still says something
            self.name = "unknown"

    def __serve_build_asgi_app__(self):
        return ReplicaHeader(make_app(self.server, load=False), self.name)

    def check_health(self) -> None:
        if not self.server.ready.is_set():
            raise RuntimeError(self.server.load_error or "the model is not loaded")


def replica_settings(settings: Settings, ray_options: RayOptions) -> Settings:
    """The replicas' settings: torch threads as many as the CPUs Ray reserves for each, unless given."""
    if settings.threads:
        return settings
    threads = max(1, math.floor(ray_options.cpus_per_replica))
    return settings.with_overrides({"threads": threads}, "--cpus-per-replica")


def build_app(settings: Settings, options: ServeOptions, ray_options: RayOptions) -> serve.Application:
    ray_options.check()
    deployment = serve.deployment(**deployment_options(ray_options, options))(serve.ingress()(CompletionReplica))
    settings = replica_settings(settings, ray_options)
    return deployment.bind(dict(settings.values), dict(settings.sources), options)


def start(ray_options: RayOptions, host: str, port: int, log_level: str = "info") -> None:
    """Start (or join) Ray and Ray Serve's HTTP proxy on ``host:port``."""
    import ray

    ray_options.check()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine unless the user says so
    level = getattr(logging, log_level.upper(), logging.INFO)
    if ray_options.address is None:
        ray.init(num_cpus=ray_options.num_cpus, include_dashboard=False, logging_level=level)
    else:
        ray.init(address=ray_options.address, logging_level=level)
    serve.start(http_options={"host": host, "port": port})


def stop(ray_options: RayOptions) -> None:
    """Undo ``start``: a local instance ends; on a cluster only this application goes."""
    import ray

    try:
        if ray_options.address is None:
            serve.shutdown()
        else:
            serve.delete(APP_NAME)
    finally:
        ray.shutdown()


def reserve_port(host: str) -> socket.socket:
    """A socket bound to a free port of ``host`` with ``SO_REUSEPORT``, not listening: no other process can
    bind that port (nor connect to it) while it is open, except one that binds with ``SO_REUSEPORT`` as
    the same user, as Ray Serve's proxy does."""
    if not hasattr(socket, "SO_REUSEPORT") or os.environ.get("SERVE_SOCKET_REUSE_PORT_ENABLED", "1") != "1":
        raise CelerisError("--port 0 with --ray needs SO_REUSEPORT (Linux; SERVE_SOCKET_REUSE_PORT_ENABLED not 0)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, 0))
    except OSError as exc:
        sock.close()
        raise CelerisError(f"cannot bind {host}: {exc}") from None
    return sock


def wait_for_proxy(host: str, port: int, timeout: float = 120.0) -> None:
    """Wait until Ray Serve's HTTP proxy answers its health check on ``host:port``; CelerisError after
    ``timeout`` seconds (the port taken by another process, say: the proxy logs why)."""
    near = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    url = url_of(near, port) + "/-/healthz"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an HTTP proxy
    end = time.monotonic() + timeout
    while True:
        try:
            with opener.open(url, timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:  # refused, reset, or an HTTP error while the proxy starts
            pass
        if time.monotonic() > end:
            raise CelerisError(f"Ray Serve's HTTP proxy did not answer on {url} in {timeout:g} s (see Ray's logs)")
        time.sleep(0.2)


def run(
    settings: Settings, options: ServeOptions, ray_options: RayOptions, host: str, port: int, log_level: str = "info"
) -> None:
    """``celeris-complete serve --ray``: deploy, then serve until interrupted (Ctrl-C or SIGTERM).  ``port``
    0: a free port, held from before Ray starts until its proxy listens on it (``reserve_port``)."""
    app = build_app(settings, options, ray_options)

    def interrupted(signum, frame) -> None:
        raise KeyboardInterrupt

    reservation = None
    if port == 0:
        if ray_options.address is not None:
            raise CelerisError("--port 0 is for a local Ray instance")
        reservation = reserve_port(host)
        port = reservation.getsockname()[1]
    try:
        start(ray_options, host, port, log_level)
    except BaseException:
        if reservation is not None:
            reservation.close()
        raise
    signal.signal(signal.SIGTERM, interrupted)  # after ray.init, which sets its own
    try:
        t0 = time.perf_counter()
        serve.run(app, name=APP_NAME, route_prefix="/")
        wait_for_proxy(host, port)
        if reservation is not None:
            reservation.close()  # the proxy holds the port now
        if ray_options.autoscaling:
            low = 1 if ray_options.min_replicas is None else ray_options.min_replicas
            scale = f"{low}-{ray_options.max_replicas} replicas (target {ray_options.target_ongoing_requests:g})"
        else:
            scale = f"{ray_options.replicas} replica(s)"
        auth = "API key required" if options.api_key else "no API key (loopback only)"
        log.info(
            "serving on %s with Ray Serve, %s, ready in %.1f s (%s)",
            url_of(host, port), scale, time.perf_counter() - t0, auth,
        )  # fmt: skip
        announce_listening(url_of(host, port))
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        if reservation is not None:
            reservation.close()
        stop(ray_options)
