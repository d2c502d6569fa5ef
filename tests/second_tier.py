"""A second tier for the editor tests: a local server that answers every completion with the same line."""

from __future__ import annotations

import http.server
import json
import threading
import time


class SecondTier(http.server.BaseHTTPRequestHandler):
    """Answers GET /v1/models and every completion request (FIM, completions) with ``TEXT``."""

    TEXT = "otal  # from the second tier"
    delay_s = 0.0

    @classmethod
    def start(cls, delay_s: float = 0.0) -> tuple[http.server.ThreadingHTTPServer, str]:
        """The server, serving on a thread (``shutdown()`` it), and its URL (it bound port 0 itself); it
        answers ``delay_s`` after each completion request (a slow tier: the answer comes well after the
        editor's own requests for the keystroke)."""
        handler = type("SlowTier", (cls,), {"delay_s": delay_s})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    def log_message(self, *args) -> None:
        pass

    def send(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send({"object": "list", "data": [{"id": "tier", "owned_by": "someone"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(self.delay_s)
        self.send({"choices": [{"index": 0, "text": self.TEXT}]})
