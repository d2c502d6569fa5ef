"""``celeris-complete serve``: the engine behind HTTP (Starlette on uvicorn).

Endpoints: ``POST /v1/fim/completions``, ``POST /v1/completions`` and ``POST /v1/chat/completions``
(a ``<FILL_HERE>`` marker in the last user message; see api.py for the fields), ``POST
/v1/edit/completions`` (the next edit, as Mercury Edit's API: next_edits.py), ``GET /v1/models``,
``GET /health`` (200 only once the model is loaded: it loads in the background while the server
already answers) and ``GET /metrics`` (Prometheus).  Every response
carries ``Server-Timing``.  Requests wait in a bounded queue for the one model worker
(scheduler.py), which decodes them in one batch (batch.py, ``--batch``: one forward pass per
refinement step for all of them) or one at a time; a full queue is answered 429.

Security: loopback by default; any other address needs an API key (a bearer token from an
environment variable or a file, compared in constant time, never logged or echoed).  Bodies and
deadlines are capped.  Generated text is only ever returned, never executed.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from starlette.applications import Starlette
from starlette.routing import Route

from celeris_complete.config import Settings
from celeris_complete.serve.access import (
    Guard,
)
from celeris_complete.serve.api import (
    ApiError,
)
from celeris_complete.serve.next_edits import edit_completions
from celeris_complete.serve.routes import (
    api_error,
    chat_completions,
    fim_completions,
    health,
    legacy_completions,
    metrics,
    models,
    not_found,
    wrong_method,
)
from celeris_complete.serve.server import CompletionServer, ServeOptions

log = logging.getLogger("celeris.serve")


def make_app(server: CompletionServer, load: bool = True) -> Guard:
    @contextlib.asynccontextmanager
    async def lifespan(app):
        if load:
            threading.Thread(target=server.load, name="celeris-load", daemon=True).start()
        yield
        server.scheduler.close()

    app = Starlette(
        routes=[
            Route("/v1/fim/completions", fim_completions, methods=["POST"]),
            Route("/v1/completions", legacy_completions, methods=["POST"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/edit/completions", edit_completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        exception_handlers={ApiError: api_error, 404: not_found, 405: wrong_method, Exception: api_error},
        lifespan=lifespan,
    )
    app.state.server = server
    return Guard(app, server)


LISTENING = "listening on "  # the line a parent that started the server reads its address from


def url_of(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def announce_listening(url: str) -> None:
    """Say on stdout, whatever the log level, that the server accepts connections at ``url`` (with the port
    it got: ``--port 0`` lets the system pick a free one).  One line, flushed: ``listening on URL``."""
    print(LISTENING + url, flush=True)


def run(settings: Settings, options: ServeOptions, host: str, port: int, log_level: str = "info") -> None:
    """Serve until interrupted.  ``port`` 0: a free port the system picks, bound here (no other process can
    take it between the choice and the bind); the line ``listening on URL`` names it once it listens."""
    import sys

    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    server = CompletionServer(settings, options)
    app = make_app(server)
    auth = "API key required" if options.api_key else "no API key (loopback only)"

    class Reporting(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started and not self.should_exit:
                bound = self.servers[0].sockets[0].getsockname()[1]  # the port got, also for port 0
                url = url_of(host, bound)
                log.info("serving %s on %s (%s); the model loads in the background", server.model_id, url, auth)
                announce_listening(url)

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        server_header=False,
        limit_concurrency=4 * options.max_queue + 16,
        timeout_graceful_shutdown=5,
    )
    reporting = Reporting(config)
    reporting.run()
    if not reporting.started:  # as uvicorn.run: the address could not be bound, say
        sys.exit(STARTUP_FAILURE)
