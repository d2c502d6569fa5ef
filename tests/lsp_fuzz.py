"""What the fuzzing tests drive the real server with: a raw JSON-RPC client, a reference document, messages.

The client speaks bytes, so it can send what no library would (broken frames, bodies that are not JSON,
ids of the wrong type); it records when each request was sent and answered, everything the server sends,
and counts messages.  The reference document applies LSP edits by the specification, independently of
``lsp/document.py``: the server's copy (``celeris/document``) must equal it after every edit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

SERVER = [sys.executable, "-m", "celeris_complete.cli", "lsp"]
ERROR_CODES = {-32700, -32600, -32601, -32602, -32800, -32801, -32002}  # everything but -32603 (internal error)


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def encode(obj: Any) -> bytes:
    return json.dumps(obj, allow_nan=False).encode()


class RawClient:
    """The server in a subprocess (``python -m celeris_complete.cli lsp``, as editors start it)."""

    def __init__(self, log_file: Path, cwd: Path | None = None) -> None:
        self.log_file = log_file
        env = {**os.environ, "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent"}
        self.proc = subprocess.Popen(
            [*SERVER, "--log-file", str(log_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(log_file.with_suffix(".stderr"), "wb"),
            env=env,
            cwd=cwd,
        )
        self.lock = threading.Condition()
        self.responses: dict[Any, dict] = {}
        self.sent_at: dict[Any, float] = {}
        self.methods: dict[Any, str] = {}
        self.latency: dict[Any, float] = {}
        self.notifications: list[dict] = []
        self.null_id_errors = 0
        self.sent = 0  # messages (frames, broken or not)
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if not line.strip():
                    break
                key, _, value = line.decode("ascii").partition(":")
                if key.strip().lower() == "content-length":
                    length = int(value)
            message = json.loads(stream.read(length))
            with self.lock:
                if "method" in message:
                    self.notifications.append(message)
                elif message.get("id") is None:
                    self.null_id_errors += 1
                else:
                    if message["id"] in self.sent_at:
                        self.latency[message["id"]] = time.perf_counter() - self.sent_at[message["id"]]
                    self.responses[message["id"]] = message
                self.lock.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()
        self.sent += 1

    def notify(self, method: str, params: Any) -> None:
        self.send_bytes(frame(encode({"jsonrpc": "2.0", "method": method, "params": params})))

    def request(self, method: str, params: Any, raw_frame=frame) -> int:
        """Send a request; its id (answer with ``wait``)."""
        self.next_id += 1
        msg_id = self.next_id
        with self.lock:
            self.sent_at[msg_id] = time.perf_counter()
            self.methods[msg_id] = method
        self.send_bytes(raw_frame(encode({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})))
        return msg_id

    def wait(self, msg_id: Any, timeout: float) -> dict | None:
        """The response to ``msg_id``, or None when none came in time."""
        end = time.monotonic() + timeout
        with self.lock:
            while msg_id not in self.responses:
                left = end - time.monotonic()
                if left <= 0 or not self.alive():
                    return self.responses.get(msg_id)
                self.lock.wait(min(left, 0.5))
            return self.responses[msg_id]

    def call(self, method: str, params: Any, timeout: float) -> dict | None:
        return self.wait(self.request(method, params), timeout)

    def initialize(self, model_dir: Path, folder: Path | None, timeout: float = 120) -> None:
        params = {
            "processId": os.getpid(),
            "capabilities": {},
            "initializationOptions": {"model": str(model_dir)},
            "workspaceFolders": [{"uri": folder.as_uri(), "name": folder.name}] if folder else None,
        }
        assert "result" in (self.call("initialize", params, timeout) or {}), "initialize was not answered"
        self.notify("initialized", {})
        end = time.monotonic() + timeout
        while not (self.call("celeris/status", {}, timeout) or {}).get("result", {}).get("ready"):
            assert time.monotonic() < end, "the model never loaded"
            time.sleep(0.1)

    def slowest(self) -> dict[str, float]:
        """The slowest answer to each method, in ms."""
        out: dict[str, float] = {}
        with self.lock:
            for msg_id, seconds in self.latency.items():
                method = self.methods[msg_id]
                out[method] = max(out.get(method, 0.0), round(seconds * 1e3, 1))
        return out

    def log_problems(self) -> list[str]:
        """Tracebacks and errors in the server's log, and errors it showed the client."""
        text = self.log_file.read_text(encoding="utf-8", errors="replace") if self.log_file.exists() else ""
        problems = [line for line in text.splitlines() if " ERROR " in line or line.startswith("Traceback")]
        with self.lock:
            shown = [n for n in self.notifications if n["method"] == "window/showMessage"]
        problems += [n["params"]["message"] for n in shown if n["params"].get("type") == 1]
        return problems

    def stop(self) -> None:
        if self.alive():
            try:
                self.wait(self.request("shutdown", None), 10)
                self.notify("exit", None)
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.alive():
            self.proc.kill()
            self.proc.wait()


# ---- the reference document -------------------------------------------------------------------
BREAK = re.compile(r"\r\n|\r|\n")  # the LSP's line breaks (not str.splitlines's)


def utf16_units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def offset(text: str, line: int, character: int) -> int:
    """Index into ``text`` of an LSP position (UTF-16 columns): past the end of a line is its end, past the
    last line the end of the text, and a column inside a character (half of a surrogate pair) is after it."""
    start = 0
    for _ in range(line):
        found = BREAK.search(text, start)
        if found is None:
            return len(text)
        start = found.end()
    found = BREAK.search(text, start)
    end = found.start() if found else len(text)
    units, i = 0, start
    while i < end and units < character:
        units += utf16_units(text[i])
        i += 1
    return i


def apply_edit(text: str, change: dict) -> str:
    """One ``contentChanges`` entry: a range (reversed ranges read the other way round) or the whole text."""
    if "range" not in change:
        return change["text"]
    start = offset(text, change["range"]["start"]["line"], change["range"]["start"]["character"])
    end = offset(text, change["range"]["end"]["line"], change["range"]["end"]["character"])
    start, end = min(start, end), max(start, end)
    return text[:start] + change["text"] + text[end:]


def line_lengths(text: str) -> list[int]:
    """Each line's length in UTF-16 units, without its break (a text ending in a break has an empty last line)."""
    return [sum(map(utf16_units, line)) for line in BREAK.split(text)]


# ---- what is sent -----------------------------------------------------------------------------
# Pieces of edits: line breaks of every kind, astral characters (two UTF-16 units), CJK, combining marks,
# a lone surrogate (JSON.stringify escapes one), a byte-order mark, characters str.splitlines breaks at.
PIECES = [
    "a", "b", "x", "_", " ", "\t", "(", ")", ":", ".", "def ", "return ",
    "\n", "\r\n", "\r", "😀", "🧪", "中文", "漢", "e\u0301", "\u0301", "\ud83d", "\ufeff", "\u2028", "\x0c", "\x00",
]  # fmt: skip
EDIT_TEXT = st.lists(st.sampled_from(PIECES), max_size=12).map("".join) | st.text(max_size=8)
DOC_TEXT = st.lists(st.sampled_from(PIECES), max_size=80).map("".join)
MAX_UINT = 2**31 - 1
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip
ODD_VALUES = st.sampled_from([-1, -(2**31), 2**31, 2**53, 2**64, 1.5, "3", None, True, [], {}, "", "\ud800"]) | JSON


@st.composite
def position(draw, lengths: list[int]) -> dict:
    """A position in a document whose lines have these lengths: mostly inside, some past the end."""
    n = len(lengths)
    line = draw(st.integers(0, n - 1) | st.integers(n, n + 3) | st.just(MAX_UINT))
    inside = lengths[line] if line < n else 2
    character = draw(st.integers(0, inside) | st.integers(0, 3).map(lambda d: inside + d) | st.just(MAX_UINT))
    return {"line": line, "character": character}


def mutate(value: Any, data: st.DataObject) -> Any:
    """``value`` with one field (at any depth) replaced by an odd value, or removed."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        out = dict(value)
        if data.draw(st.integers(0, 3)) == 0:
            del out[key]
        else:
            out[key] = mutate(value[key], data)
        return out
    if isinstance(value, list) and value and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        return [*value[:i], mutate(value[i], data), *value[i + 1 :]]
    return data.draw(ODD_VALUES)
