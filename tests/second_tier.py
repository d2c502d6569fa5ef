"""Small local HTTP servers that stand in for a completion endpoint in the tests: ``Endpoint`` (the
shared plumbing), and ``SecondTier``, which answers every completion with the same line."""

from __future__ import annotations

import http.server
import json
import threading
import time


class Endpoint(http.server.BaseHTTPRequestHandler):
    """Quiet, answers ``GET /v1/models`` with ``MODEL`` (not ours), and ``send``s JSON or raw bytes."""

    MODEL = "tier"

    @classmethod
    def start(cls, **attributes) -> tuple[http.server.ThreadingHTTPServer, str]:
        """The server (a subclass with ``attributes``), serving on a thread (``shutdown()`` it), and its URL
        (it bound port 0 itself)."""
        handler = type(cls.__name__, (cls,), attributes) if attributes else cls
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    def log_message(self, *args) -> None:
        pass

    def send(self, payload: dict | bytes, status: int = 200, kind: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers["Content-Length"]))

    def do_GET(self) -> None:
        self.send({"object": "list", "data": [{"id": self.MODEL, "owned_by": "someone"}]})


class SecondTier(Endpoint):
    """Answers every completion request (FIM, completions) with ``TEXT``, ``delay_s`` after it (a slow
    tier: ``start(delay_s=...)``)."""

    TEXT = "otal  # from the second tier"
    delay_s = 0.0

    def do_POST(self) -> None:
        self.body()
        time.sleep(self.delay_s)
        self.send({"choices": [{"index": 0, "text": self.TEXT}]})
