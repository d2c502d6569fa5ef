"""End-to-end: the real language server in a subprocess, spoken to by a real LSP client."""

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from tests.conftest import resident_drop_after_free
from tests.lsp_session import SERVER, Session, run

URI = "file:///project/app.py"
TEXT = "import os\n\n\ndef list_dir(path):\n    return os.\n\n\ndef add(a, b):\n    return a + b\n"
# The tiny model's answers kept as they are: a high end-of-span penalty keeps them from being empty, and
# no compiler check withholds them (they are seldom Python).
ANSWERING = {"mode": "line", "eos_penalty": 20.0, "syntax_candidates": 0}


def field(obj, name):
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def test_capabilities_and_inline_completion(tiny_model_dir):
    async def scenario():
        s = Session(tiny_model_dir)
        init = await s.start()
        caps = init.capabilities
        assert caps.inline_completion_provider is not None
        assert caps.completion_provider is not None
        assert caps.position_encoding in (None, types.PositionEncodingKind.Utf16)
        s.open(URI, TEXT)
        result = await s.inline(URI, 4, 14)
        assert len(result.items) <= 1
        for item in result.items:
            assert item.range.start == item.range.end == types.Position(4, 14)
            assert item.insert_text.strip()
        invoked = await s.inline(URI, 4, 14, invoked=True)
        assert len(invoked.items) <= 3
        assert len({i.insert_text for i in invoked.items}) == len(invoked.items)
        assert s.timings and field(s.timings[-1], "total_ms") > 0
        # Unopened documents and positions out of range: an empty answer, never an error.
        assert (await s.inline("file:///project/never_opened.py", 0, 0)).items in ((), [])
        assert (await s.inline(URI, 999, 0)).items in ((), [])
        assert (await s.inline(URI, 4, 9999)) is not None
        await s.stop()

    run(scenario())


def test_an_invoked_request_offers_distinct_alternatives_after_the_automatic_answer(shipped_model_dir):
    async def scenario():
        # No deadline: the answers must not depend on how busy the machine is; a line answer that is
        # not empty (the block-mode end-of-span penalty), so that there are three to offer.
        options = {"mode": "line", "budget_ms": 60000, "eos_penalty_line": 1.0, "min_confidence": 0.0}
        s = Session(shipped_model_dir, init_options=options)
        await s.start()
        s.open(URI, "for i in range():\n    print(i)\n")
        automatic = await s.inline(URI, 0, 15)
        invoked = await s.inline(URI, 0, 15, invoked=True)
        texts = [item.insert_text for item in invoked.items]
        assert len(texts) == 3 and len(set(texts)) == 3 and all(t.strip() for t in texts), texts
        assert [item.insert_text for item in automatic.items] == texts[:1]  # the answer first, as shown
        await s.stop()

    run(scenario())


def test_completion_items_replace_the_word_being_typed(tiny_model_dir):
    async def scenario():
        s = Session(tiny_model_dir, init_options=ANSWERING)
        await s.start()
        s.open(URI, "def add(first, second):\n    return fir\n")
        result = await s.completion(URI, 1, 14)
        assert result.items, "this place has an answer: the test needs one"
        # The same answer as ghost text (from the typing cache): what goes after the cursor.
        (answer,) = (await s.inline(URI, 1, 14)).items
        for item in result.items:
            edit = item.text_edit
            # "fir" (columns 11-14) is replaced by itself and the answer, so that the client's filter matches.
            assert edit.range == types.Range(start=types.Position(1, 11), end=types.Position(1, 14)), edit.range
            assert edit.new_text == "fir" + answer.insert_text and answer.insert_text.strip()
            assert item.filter_text == edit.new_text and item.label == edit.new_text.split("\n")[0].strip()
        await s.stop()

    run(scenario())


def test_typing_through_the_shown_completion_needs_no_model_call(tiny_model_dir):
    async def scenario():
        # A high end-of-span penalty keeps the answer non-empty: this test checks the cache, not the model
        # (a plain-text document: the compiler's check would withhold a random model's Python answer).
        s = Session(tiny_model_dir, init_options={"mode": "line", "max_chars_after_cursor": 10, "eos_penalty": 20.0})
        await s.start()
        notes = "file:///project/notes.txt"
        s.open(notes, "x = compute(\n", language="plaintext")
        first = await s.inline(notes, 0, 12)
        assert first.items and len(first.items[0].insert_text) >= 2, first
        shown = first.items[0].insert_text
        calls = field(await s.status(), "model_calls")
        s.insert(notes, 0, 12, shown[0])
        again = await s.inline(notes, 0, 13)
        assert again.items[0].insert_text == shown[1:]
        assert field(await s.status(), "model_calls") == calls
        await s.stop()

    run(scenario())


def test_non_ascii_positions_in_each_encoding(tiny_model_dir):
    """The ranges the server returns count in the negotiated units: the word being typed starts after
    characters of 1 to 4 UTF-8 bytes and 1 or 2 UTF-16 units (😀 and the word's last letter, 𝔵 U+1D535,
    are outside the BMP), so each encoding gives other offsets for the same place."""
    head = "s = '😀日本é' + "
    word = "dé𝔵"
    line = head + word
    text = f"{line}\nt = 1\n"

    async def scenario(encoding, units):
        s = Session(tiny_model_dir, encodings=[encoding], init_options=ANSWERING)
        init = await s.start()
        assert init.capabilities.position_encoding == encoding
        s.open(URI, text)
        end = types.Position(0, units(line))
        result = await s.completion(URI, end.line, end.character)
        assert result.items, f"{encoding}: this place has an answer: the test needs one"
        (answer,) = (await s.inline(URI, end.line, end.character)).items
        await s.stop()
        assert answer.range == types.Range(start=end, end=end) and answer.insert_text.strip()
        for item in result.items:
            assert item.text_edit.range == types.Range(start=types.Position(0, units(head)), end=end), encoding
            assert item.text_edit.new_text == word + answer.insert_text, encoding

    offsets = set()
    for encoding, units in [
        (types.PositionEncodingKind.Utf16, lambda s: len(s.encode("utf-16-le")) // 2),
        (types.PositionEncodingKind.Utf8, lambda s: len(s.encode("utf-8"))),
        (types.PositionEncodingKind.Utf32, len),
    ]:
        run(scenario(encoding, units))
        offsets.add((units(head), units(line)))
    assert offsets == {(14, 18), (21, 28), (13, 16)}  # three encodings, three pairs of offsets


def test_cursor_offsets_follow_the_negotiated_encoding(tiny_model_dir):
    """The text before the cursor is exactly right for emoji, CJK and combining marks."""
    from pygls.workspace import Workspace

    from celeris_complete.config import load_settings
    from celeris_lsp.document import use_fast_documents
    from celeris_lsp.server import make_server

    line = "a = '😀日本e\u0301' + name"
    server = make_server(load_settings(environ={}, user_file=tiny_model_dir / "none"))
    for encoding, units in [
        (types.PositionEncodingKind.Utf16, lambda s: len(s.encode("utf-16-le")) // 2),
        (types.PositionEncodingKind.Utf8, lambda s: len(s.encode("utf-8"))),
        (types.PositionEncodingKind.Utf32, len),
    ]:
        server.protocol._workspace = Workspace(None, types.TextDocumentSyncKind.Incremental, [], encoding)
        use_fast_documents(server.workspace)  # as the server's initialize does
        server.workspace.put_text_document(types.TextDocumentItem(uri=URI, language_id="python", version=1, text=line))
        for cut in (5, 6, 7, 9, 10, 13):
            prefix, suffix, at_start, at_end = server.around_cursor(URI, types.Position(0, units(line[:cut])))
            assert (prefix, suffix) == (line[:cut], line[cut:]) and at_start and at_end


def test_model_that_fails_to_load_keeps_the_server_up(tmp_path):
    async def scenario():
        s = Session(tmp_path / "no-model")
        await s.start()
        status = await s.status()
        assert not field(status, "model_loaded") and "model directory not found" in field(status, "error")
        await s.wait_message("failed to load")
        s.open(URI, TEXT)
        assert (await s.inline(URI, 4, 14)).items in ((), [])
        await s.stop()

    run(scenario())


def test_configuration_changes_apply(tiny_model_dir):
    async def scenario():
        s = Session(tiny_model_dir)
        await s.start()
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"celeris": {"steps": 2, "mode": "line"}})
        )
        settings = field(await s.status(), "settings")
        assert field(settings, "steps") == 2 and field(settings, "mode") == "line"
        s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"steps": "many"}))
        await s.wait_message("'steps' must be a int")
        assert field(field(await s.status(), "settings"), "steps") == 2
        await s.stop()

    run(scenario())


def test_secrets_and_ignored_files_are_never_completed(tiny_model_dir):
    async def scenario():
        s = Session(tiny_model_dir, init_options={**ANSWERING, "ignore_globs": ["*/vendor/*"]})
        await s.start()
        # Each file skipped, next to an ordinary file of nearly the same path and the same text that is completed.
        for skipped, ordinary in [
            ("file:///project/.env", "file:///project/env.py"),
            ("file:///project/keys/server.pem", "file:///project/keys/server.py"),
            ("file:///project/vendor/lib.py", "file:///project/vendored/lib.py"),
        ]:
            for uri in (skipped, ordinary):
                s.open(uri, "API_KEY = \n")
            assert (await s.inline(ordinary, 0, 10, invoked=True)).items, ordinary
            assert (await s.completion(ordinary, 0, 10)).items, ordinary
            assert (await s.inline(skipped, 0, 10, invoked=True)).items in ((), []), skipped
            assert (await s.inline(skipped, 0, 10)).items in ((), []), skipped
            assert (await s.completion(skipped, 0, 10)).items in ((), []), skipped
        await s.stop()

    run(scenario())


def test_storm_and_cancellation(tiny_model_dir):
    async def scenario():
        s = Session(tiny_model_dir)
        await s.start()
        for i in range(60):
            uri = f"file:///project/f{i % 5}.py"
            s.open(uri, TEXT * 3)
            s.insert(uri, 1, 0, "x = 1\n")
            if i % 3 == 0:
                s.close(uri)
        # Many requests for one document at once: older ones are superseded, none crashes.
        s.open(URI, TEXT)
        tasks = [asyncio.ensure_future(s.inline(URI, 4, 14, invoked=True)) for _ in range(8)]
        await asyncio.sleep(0)  # (each task sends its request)
        # A request for another document, cancelled by the client while it waits behind those.
        other = "file:///project/other.py"
        s.open(other, TEXT)
        pending = s.client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION,
            types.InlineCompletionParams(
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
                text_document=types.TextDocumentIdentifier(uri=other),
                position=types.Position(4, 14),
            ),
            msg_id="cancelled-by-the-client",
        )
        s.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="cancelled-by-the-client"))
        with pytest.raises(JsonRpcRequestCancelled):
            await pending
        results = await asyncio.gather(*tasks)
        assert all(r is not None for r in results)
        assert field(await s.status(), "ready")
        await s.stop()

    run(scenario())

    # The cancelled call must stop on the model thread, not only lose its answer: a call that runs until it
    # is told to stop (at most 30 s) is cancelled while it runs, as pygls cancels a request's handler.
    from celeris_complete.config import load_settings
    from celeris_lsp.server import make_server

    server = make_server(load_settings(environ={}, user_file=tiny_model_dir / "none"))
    started, stopped = threading.Event(), threading.Event()

    def call(should_cancel):
        started.set()
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if should_cancel():
                stopped.set()
                return "stopped"
            time.sleep(0.005)
        return "ran to the end"

    async def cancel_while_it_runs():
        task = asyncio.ensure_future(server.run_model(URI, call))
        assert await asyncio.to_thread(started.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await asyncio.to_thread(stopped.wait, 10)

    try:
        assert run(cancel_while_it_runs()), "the model thread went on with a cancelled call"
    finally:
        server.model_thread.shutdown(wait=False)


def frame(payload: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(payload) + payload


class RawServer:
    """The server in a subprocess, spoken to in raw JSON-RPC frames; every read has a timeout."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = stream.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                key, _, value = line.decode().partition(":")
                headers[key.strip().lower()] = value.strip()
            self.messages.put(json.loads(stream.read(int(headers["content-length"]))))

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj) -> None:
        self.send_bytes(frame(json.dumps(obj).encode()))

    def response(self, msg_id, timeout: float = 60) -> dict:
        end = time.time() + timeout
        while True:
            msg = self.messages.get(timeout=max(0.01, end - time.time()))
            if msg.get("id") == msg_id and "method" not in msg:
                return msg

    def initialize(self, model_dir, process_id=None) -> dict:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "capabilities": {},
                    "processId": process_id,
                    "initializationOptions": {"model": str(model_dir)},
                },
            }
        )
        return self.response(1)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_malformed_messages_and_unknown_methods(tiny_model_dir):
    server = RawServer()
    try:
        server.send_bytes(frame(b"{this is not json"))
        server.send_bytes(frame(b'{"jsonrpc": "2.0", "id": 99, "method": 12}'))
        assert "capabilities" in server.initialize(tiny_model_dir)["result"]
        server.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        server.send({"jsonrpc": "2.0", "id": 2, "method": "no/suchMethod", "params": {}})
        assert server.response(2)["error"]["code"] == -32601
        server.send({"jsonrpc": "2.0", "id": 3, "method": "textDocument/inlineCompletion", "params": {"bad": True}})
        assert "error" in server.response(3)
        server.send({"jsonrpc": "2.0", "id": 4, "method": "celeris/status", "params": {}})
        assert "result" in server.response(4)
    finally:
        server.kill()


def test_exits_when_the_client_disconnects(tiny_model_dir):
    server = RawServer()
    try:
        server.initialize(tiny_model_dir)
        server.proc.stdin.close()
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.kill()


def test_exits_when_the_parent_dies(tiny_model_dir):
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server = RawServer()
    try:
        server.initialize(tiny_model_dir, process_id=parent.pid)
        parent.kill()
        parent.wait()
        start = time.time()
        assert server.proc.wait(timeout=30) == 0
        assert time.time() - start < 15
    finally:
        server.kill()
        parent.kill()


def test_ready_quickly(tiny_model_dir):
    """The server answers initialize long before the model is loaded (numbers: see the benchmark)."""
    start = time.time()
    server = RawServer()
    try:
        server.initialize(tiny_model_dir, process_id=os.getpid())
        assert time.time() - start < 30  # generous: CI machines are shared
    finally:
        server.kill()


def test_a_document_of_tens_of_megabytes_is_edited_and_completed(tiny_model_dir):
    text = "".join(f"def function_{i}(value):\n    return value * {i}\n\n" for i in range(300_000))
    assert len(text) > 15_000_000
    last = text.count("\n")

    async def scenario():
        # (The tiny model's text is seldom Python: the compiler's check would withhold most of it.)
        s = Session(tiny_model_dir, init_options={"mode": "line", "eos_penalty": 20.0, "syntax_candidates": 0})
        await s.start()
        uri = "file:///project/huge.py"
        s.open(uri, text)
        s.insert(uri, last, 0, "def tail(value):\n    return ")
        result = await s.inline(uri, last + 1, 11)
        assert result.items and result.items[0].range.start == types.Position(last + 1, 11)
        s.insert(uri, 450_001, 4, "value = 1\n    ")  # an edit in the middle, then a completion after it
        result = await s.inline(uri, 450_002, 4, invoked=True)
        assert result.items
        status = await s.status()
        assert field(status, "requests") == 2
        await s.stop()

    run(scenario())


def test_free_heap_memory_can_be_given_back():
    import platform

    from celeris_complete.system import memory

    if not memory.can_trim():
        assert platform.libc_ver()[0] != "glibc", "glibc has malloc_trim: the server must find it"
        pytest.skip(f"no malloc_trim in this C library ({platform.libc_ver()[0] or sys.platform}): nothing given back")
    freed_mb, dropped_mb = resident_drop_after_free(memory.trim_heap)
    assert dropped_mb >= freed_mb / 2, f"{freed_mb:.0f} MB freed, resident memory fell by {dropped_mb:.0f} MB"
