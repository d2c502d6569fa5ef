"""Fuzzing the real language server process with generated messages (hypothesis stateful testing).

At least 10,000 messages per run (``LSP_FUZZ_MESSAGES`` for a longer one, e.g. 200000): random and
truncated bodies in correct frames, frames with wrong or missing lengths, valid methods with odd params
(positions past the end, negative, huge; reversed ranges; unknown URIs; versions going backwards), random
incremental edits through emoji, CJK, combining marks, CRLF and lone CR, interleaved with completion
requests and cancellations.  Oracles: the process never exits and answers a request after every step in
time; every request gets a result or a proper error (never an internal error); the server's copy of each
document equals the reference after every edit; no traceback or error in its log, none shown to the client.
``LSP_FUZZ_REPORT=path`` writes the run's figures (messages, crashes, hangs, mismatches, slowest answer).
"""

from __future__ import annotations

import itertools
import json
import os
import time

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from tests.lsp_fuzz import (
    DOC_TEXT,
    EDIT_TEXT,
    ERROR_CODES,
    JSON,
    RawClient,
    apply_edit,
    encode,
    frame,
    line_lengths,
    mutate,
    position,
)

MESSAGES = int(os.environ.get("LSP_FUZZ_MESSAGES", "10000"))
# Shrinking replays steps against the live server: slow when it hangs; LSP_FUZZ_SHRINK=0 skips it.
PHASES = [p for p in Phase if p != Phase.shrink or os.environ.get("LSP_FUZZ_SHRINK", "1") != "0"]
ANSWER_S = 20.0  # a request after each step must be answered within this (CI machines are slow and shared)
URI_NAMES = ["a.py", "with%20space.py", "%E4%B8%AD%E6%96%87.py", "notes.txt", "deep/er/b.py", "x%2Fy.py"]
METHODS = [
    "textDocument/inlineCompletion", "textDocument/completion", "textDocument/didOpen", "textDocument/didChange",
    "textDocument/didClose", "textDocument/didSave", "celeris/status", "celeris/document", "$/cancelRequest",
    "$/setTrace", "workspace/didChangeConfiguration", "textDocument/hover", "no/such", "",
]  # fmt: skip
COUNTER = itertools.count()


class Fuzz(RuleBasedStateMachine):
    """One example: documents of its own, opened, edited, completed in and closed on the shared server."""

    client: RawClient  # set by the test
    stats: dict

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"file:///fuzz/{next(COUNTER)}/"
        self.docs: dict[str, str] = {}  # uri -> the reference text
        self.version: dict[str, int] = {}
        self.expected: list[tuple[int, str, str]] = []  # (celeris/document request id, uri, text it must return)
        self.must_answer: list[int] = []  # requests that must get a result (not an error)
        self.answered: list[int] = []  # requests that must get a result or a proper error

    # ---- documents ----------------------------------------------------------------------------
    @rule(name=st.sampled_from(URI_NAMES), text=DOC_TEXT)
    def open(self, name: str, text: str) -> None:
        uri = self.prefix + name
        self.docs[uri], self.version[uri] = text, 1
        item = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        self.client.notify("textDocument/didOpen", {"textDocument": item})
        self.check_document(uri)

    def check_document(self, uri: str) -> None:
        self.expected.append((self.client.request("celeris/document", {"uri": uri}), uri, self.docs.get(uri)))

    @precondition(lambda self: self.docs)
    @rule(data=st.data())
    def edit(self, data: st.DataObject) -> None:
        """A didChange of one to four changes, each applied to the text the one before left."""
        uri = data.draw(st.sampled_from(sorted(self.docs)))
        text, changes = self.docs[uri], []
        for _ in range(data.draw(st.integers(1, 4))):
            if data.draw(st.integers(0, 9)) == 0:
                change = {"text": data.draw(DOC_TEXT)}
            else:
                lengths = line_lengths(text)
                start, end = data.draw(position(lengths)), data.draw(position(lengths))
                change = {"range": {"start": start, "end": end}, "text": data.draw(EDIT_TEXT)}
            text = apply_edit(text, change)
            changes.append(change)
        self.version[uri] += data.draw(st.sampled_from([1, 1, 1, 0, -1, -5]))  # versions may go backwards
        doc = {"uri": uri, "version": self.version[uri]}
        self.client.notify("textDocument/didChange", {"textDocument": doc, "contentChanges": changes})
        self.docs[uri] = text
        self.check_document(uri)

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), keys=st.integers(1, 30))
    def type_and_complete(self, data: st.DataObject, keys: int) -> None:
        """Typing: one character inserted per didChange, each followed by an automatic completion request
        (some cancelled at once), like an editor at the end of a line."""
        uri = data.draw(st.sampled_from(sorted(self.docs)))
        lengths = line_lengths(self.docs[uri])
        line = data.draw(st.integers(0, len(lengths) - 1))
        where = {"line": line, "character": lengths[line]}
        for ch in data.draw(st.lists(st.sampled_from(["a", "b", "_", " ", "(", ".", "😀", "中", "\n"]), min_size=keys)):
            change = {"range": {"start": where, "end": where}, "text": ch}
            self.docs[uri] = apply_edit(self.docs[uri], change)
            self.version[uri] += 1
            doc = {"uri": uri, "version": self.version[uri]}
            self.client.notify("textDocument/didChange", {"textDocument": doc, "contentChanges": [change]})
            where = (
                {"line": where["line"] + 1, "character": 0}
                if ch == "\n"
                else {"line": where["line"], "character": where["character"] + len(ch.encode("utf-16-le")) // 2}
            )
            params = {"textDocument": {"uri": uri}, "position": where, "context": {"triggerKind": 2}}
            msg_id = self.client.request("textDocument/inlineCompletion", params)
            if data.draw(st.integers(0, 4)) == 0:
                self.client.notify("$/cancelRequest", {"id": msg_id})
                self.answered.append(msg_id)
            else:
                self.must_answer.append(msg_id)
        self.check_document(uri)

    @precondition(lambda self: self.docs)
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        uri = data.draw(st.sampled_from(sorted(self.docs)))
        self.client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        del self.docs[uri]
        self.check_document(uri)  # null now

    # ---- requests -----------------------------------------------------------------------------
    @rule(data=st.data(), invoked=st.booleans(), inline=st.booleans(), cancel=st.booleans())
    def complete(self, data: st.DataObject, invoked: bool, inline: bool, cancel: bool) -> None:
        """A completion anywhere (past the end too) in an open document or one that is not open."""
        uri = data.draw(st.sampled_from(sorted(self.docs) + [self.prefix + "never-opened.py", "untitled:Untitled-1"]))
        where = data.draw(position(line_lengths(self.docs.get(uri, ""))))
        params = {"textDocument": {"uri": uri}, "position": where}
        if inline:
            params["context"] = {"triggerKind": 1 if invoked else 2}
            if data.draw(st.integers(0, 3)) == 0:  # a popup item selected, its range anywhere
                selected = {"range": {"start": data.draw(position([3])), "end": where}, "text": data.draw(EDIT_TEXT)}
                params["context"]["selectedCompletionInfo"] = selected
        msg_id = self.client.request("textDocument/" + ("inlineCompletion" if inline else "completion"), params)
        if cancel:
            self.client.notify("$/cancelRequest", {"id": msg_id})
        (self.answered if cancel else self.must_answer).append(msg_id)

    @rule(data=st.data(), method=st.sampled_from(METHODS))
    def odd_params(self, data: st.DataObject, method: str) -> None:
        """A known method with random params, or with one field of valid params made odd (a negative or huge
        position, a string for a number, a field missing...)."""
        uri = data.draw(st.sampled_from(sorted(self.docs) or [self.prefix + "a.py"]))
        valid = {
            "textDocument": {"uri": uri, "version": 1},
            "position": {"line": 0, "character": 0},
            "context": {"triggerKind": 1},
            "contentChanges": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                                "text": "x"}],
        }  # fmt: skip
        params = data.draw(JSON) if data.draw(st.booleans()) else mutate(valid, data)
        if method == "textDocument/didChange" and isinstance(params, dict):
            params.pop("textDocument", None)  # (changes to our own documents are the edit rule's: this one names none)
        if method in ("textDocument/didOpen", "textDocument/didClose") and isinstance(params, dict):
            params["textDocument"] = {"uri": "file:///fuzz/odd/" + str(next(COUNTER))}
        if method == "workspace/didChangeConfiguration":
            params = {"settings": {"celeris": {"no_such_setting": data.draw(JSON)}}}  # (a real one could slow all)
        if data.draw(st.booleans()):
            self.client.notify(method, params)
        else:
            self.answered.append(self.client.request(method, params))

    @rule(data=st.data())
    def bad_body(self, data: st.DataObject) -> None:
        """A correct frame around a body that is not a JSON-RPC message: bytes, cut JSON, other JSON, odd ids."""
        valid = encode({"jsonrpc": "2.0", "id": "raw", "method": "celeris/status", "params": {}})
        body = data.draw(
            st.binary(max_size=40)
            | st.integers(1, len(valid) - 1).map(lambda n: valid[:n])
            | JSON.map(encode)
            | st.sampled_from([b"[" * 100_000, b'{"a":' * 50_000, b"1" * 5000, b"null", b"\xff\xfe{}"])
            | ODD_IDS.map(lambda i: encode({"jsonrpc": "2.0", "id": i, "method": "celeris/status"}))
            | st.sampled_from(["1.0", None, 2]).map(lambda v: encode({"jsonrpc": v, "id": "raw", "method": "x"}))
        )
        self.client.send_bytes(frame(body))

    @rule(data=st.data())
    def bad_frame(self, data: st.DataObject) -> None:
        """A request whose header lies about its length or is missing or misspelt (it may be lost; the request
        after this step must still be answered)."""
        body = encode({"jsonrpc": "2.0", "id": "lost", "method": "celeris/status", "params": {}})
        delta = data.draw(st.integers(-len(body), -1) | st.integers(1, 60) | st.sampled_from([10**6, 10**12]))
        header = data.draw(
            st.sampled_from(
                [
                    b"Content-Length: %d\r\n\r\n" % (len(body) + delta),
                    b"",
                    b"\r\n",
                    b"Content-Lenght: %d\r\n\r\n" % len(body),
                    b"Content-Length: -%d\r\n\r\n" % len(body),
                    b"Content-Length: %d\r\n" % len(body),
                    b"Content-Length: 99999999999999999999\r\n\r\n",
                ]
            )
        )
        self.client.send_bytes(header + body)

    # ---- oracles ------------------------------------------------------------------------------
    @invariant()
    def answers_in_time(self) -> None:
        """A request after each step is answered in time; every document check so far matched."""
        client = self.client
        msg_id = client.request("celeris/status", {})
        reply = client.wait(msg_id, ANSWER_S)
        if reply is None:
            self.stats["hangs" if client.alive() else "crashes"] += 1
            raise AssertionError(f"{'no answer in time' if client.alive() else 'the server exited'}\n" + tail(client))
        assert "result" in reply, reply
        for msg_id, uri, text in self.expected:
            reply = client.wait(msg_id, ANSWER_S)
            assert reply is not None, f"celeris/document for {uri} not answered"
            got = (reply.get("result") or {}).get("text")
            if got != text:
                self.stats["mismatches"] += 1
                raise AssertionError(f"{uri}: the server has {got!r}, the reference {text!r}")
        self.expected.clear()

    def teardown(self) -> None:
        client = self.client
        for uri in list(self.docs):
            client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        if not client.alive():
            return
        for msg_id in self.must_answer + self.answered:
            reply = client.wait(msg_id, 60)
            assert reply is not None, f"request {msg_id} never answered\n" + tail(client)
            if msg_id in self.must_answer and reply.get("error", {}).get("code") != -32800:
                assert "result" in reply, f"request {msg_id}: {reply}"
            else:
                assert "result" in reply or reply.get("error", {}).get("code") in ERROR_CODES, reply


ODD_IDS = st.sampled_from([None, 1.5, True, [], {}, -1, 2**70, ""])  # (none of them an id the client uses)


def tail(client: RawClient) -> str:
    text = client.log_file.read_text(encoding="utf-8", errors="replace") if client.log_file.exists() else ""
    return "server log (end):\n" + "\n".join(text.splitlines()[-30:])


def fuzz(client: RawClient, messages: int) -> dict:
    """Run examples until ``messages`` messages have been sent; the figures."""
    stats = {"crashes": 0, "hangs": 0, "mismatches": 0}
    Fuzz.client, Fuzz.stats = client, stats
    start = time.perf_counter()
    while client.sent < messages:
        run_state_machine_as_test(
            Fuzz,
            settings=settings(
                max_examples=10,
                stateful_step_count=40,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
                phases=PHASES,
            ),
        )
    with client.lock:
        requests = len(client.sent_at)
    slowest = client.slowest()
    return {
        "messages": client.sent,
        "requests": requests,
        "seconds": round(time.perf_counter() - start, 1),
        **stats,
        "errors_answered_with_null_id": client.null_id_errors,
        "slowest_response_ms": max(slowest.values()),
        "slowest_response_ms_by_method": slowest,
    }


@pytest.fixture
def fuzz_server(tiny_model_dir, small_corpus, tmp_path):
    client = RawClient(tmp_path / "server.log")
    client.initialize(tiny_model_dir, small_corpus)
    yield client
    client.stop()


def test_fuzzing_the_server(fuzz_server):
    report = fuzz(fuzz_server, MESSAGES)
    print(json.dumps(report))
    if path := os.environ.get("LSP_FUZZ_REPORT"):
        with open(path, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=1)
    assert fuzz_server.alive() and report["messages"] >= MESSAGES
    assert not fuzz_server.log_problems(), "\n".join(fuzz_server.log_problems()[:20])


def test_requests_after_broken_frames_are_answered(fuzz_server):
    """The real process, after each way of losing the framing (pygls never found the next header again)."""
    client = fuzz_server
    body = encode({"jsonrpc": "2.0", "id": "raw", "method": "celeris/status", "params": {}})
    for broken in [
        b"Content-Length: %d\r\n\r\n" % (len(body) - 9) + body,  # too short
        b"Content-Length: %d\r\n\r\n" % (len(body) + 7) + body,  # too long by less than a header
        b"Content-Length: %d\r\n\r\n" % (len(body) + 10**9) + body,  # far too long
        body,  # no header
        b"Content-Type: x\r\n\r\n" + body,
    ]:
        client.send_bytes(broken)
        reply = client.call("celeris/status", {}, ANSWER_S)
        assert reply is not None and "result" in reply, broken
    assert not client.log_problems()
