"""The server's handling of what a client gets wrong, message by message (regression tests of what the
fuzzing tests found), on the protocol object itself: bodies in, responses out."""

from __future__ import annotations

import json

import pytest
from lsprotocol import types

from celeris_complete.config import load_settings
from celeris_lsp.server import make_server

URI = "file:///fuzz/with%20space.py"


class Wire:
    """A server in this process whose writer keeps what it sends."""

    def __init__(self, tmp_path) -> None:
        self.server = make_server(load_settings(environ={}, user_file=tmp_path / "none"))
        self.sent: list[dict] = []
        self.server.protocol.set_writer(self)
        self.request(1, "initialize", {"capabilities": {}, "initializationOptions": {"model": str(tmp_path / "no")}})

    def write(self, data: bytes) -> None:
        self.sent.append(json.loads(data.split(b"\r\n\r\n", 1)[1]))

    def close(self) -> None:
        pass

    def body(self, data: bytes) -> None:
        self.server.protocol.handle_body(data)

    def notify(self, method: str, params) -> None:
        self.body(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode())

    def request(self, msg_id, method: str, params) -> dict | None:
        self.body(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode())
        return self.reply(msg_id)

    def reply(self, msg_id) -> dict | None:
        return next((m for m in self.sent if m.get("id") == msg_id and "method" not in m), None)

    def errors_shown(self) -> list[str]:
        shown = [m["params"] for m in self.sent if m.get("method") == "window/showMessage"]
        return [p["message"] for p in shown if p["message"].startswith("Error in server")]


@pytest.fixture
def wire(tmp_path):
    wire = Wire(tmp_path)
    yield wire
    wire.server.model_thread.shutdown(wait=True)


@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe", b"[" * 100_000, b'{"a":' * 50_000, b"1" * 5000])
def test_a_body_that_is_not_json_gets_a_parse_error(wire, body):
    wire.body(body)
    assert wire.sent[-1] == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse Error"}}


@pytest.mark.parametrize("body", [b"[]", b"3", b"null", b'{"jsonrpc": "2.0", "id": 1.5, "method": "celeris/status"}'])
def test_what_is_not_a_request_object_gets_an_invalid_request_error(wire, body):
    wire.body(body)
    assert wire.sent[-1]["id"] is None and wire.sent[-1]["error"]["code"] == -32600


def test_a_request_for_a_notification_method_is_answered(wire):
    """pygls read it as the notification and dropped its id: the client waited for ever."""
    reply = wire.request(7, "workspace/didChangeConfiguration", {"settings": {}})
    assert reply["error"]["code"] == -32600


def test_a_request_with_unreadable_params_is_answered(wire, caplog):
    reply = wire.request(8, "textDocument/inlineCompletion", {"textDocument": {"uri": URI}, "position": {"line": -1}})
    assert reply["error"]["code"] == -32602
    assert "Traceback" not in caplog.text  # a client's mistake: one line, not a traceback


def test_requests_after_shutdown_get_an_error(wire):
    assert "result" in wire.request(2, "shutdown", None)
    assert wire.request(3, "celeris/status", {})["error"]["code"] == -32600


def test_changes_to_a_document_that_is_not_open_are_ignored(wire):
    change = {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": "x"}]}
    wire.notify("textDocument/didChange", change)
    assert wire.errors_shown() == [] and wire.request(4, "celeris/document", {"uri": URI})["result"] is None


def test_documents_with_escaped_uris_are_found(wire):
    """pygls keys documents by the unescaped URI: ours were never found (no completion in a folder with a space)."""
    wire.notify(
        "textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": "a"}}
    )
    assert wire.request(5, "celeris/document", {"uri": URI})["result"]["text"] == "a"
    assert wire.server.around_cursor(URI, types.Position(0, 1))[0] == "a"


def test_finished_notifications_are_not_kept(wire):
    """pygls kept the future (and the params, text included) of every didOpen, didChange and didClose."""
    for i in range(50):
        uri = f"file:///fuzz/{i}.py"
        item = {"uri": uri, "languageId": "python", "version": 1, "text": "x" * 1000}
        wire.notify("textDocument/didOpen", {"textDocument": item})
        change = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "y"}
        wire.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [change]})
        wire.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert wire.server.protocol._request_futures == {}


def test_vscodes_selected_completion_range_as_a_list_is_read(wire):
    """vscode-languageclient sends selectedCompletionInfo.range as [start, end]: read, not refused."""
    params = {
        "context": {"triggerKind": 1, "selectedCompletionInfo": {
            "range": [{"line": 2, "character": 11}, {"line": 2, "character": 12}], "text": "total"}},
        "textDocument": {"uri": URI},
        "position": {"line": 2, "character": 12},
    }  # fmt: skip
    data = {"jsonrpc": "2.0", "id": 9, "method": "textDocument/inlineCompletion", "params": params}
    message = wire.server.protocol.structure_message(data)
    assert message is not None and wire.reply(9) is None  # read, and no error answered
    selected = message.params.context.selected_completion_info
    assert (selected.range.start.character, selected.range.end.character, selected.text) == (11, 12, "total")
    # VS Code's own number for a request the user made (Invoke, 0): the protocol's Invoked.
    data = {"jsonrpc": "2.0", "id": 10, "method": "textDocument/inlineCompletion", "params": {**params, "context": {
        "triggerKind": 0}}}  # fmt: skip
    message = wire.server.protocol.structure_message(data)
    assert message.params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked and wire.reply(10) is None


def test_a_server_stopped_while_its_model_fails_to_load_exits(tmp_path):
    """The load thread's error message, sent after ``exit`` closed stdout, failed; pygls reported that
    with another message, which failed too, and so on: stderr filled and the process never exited."""
    import asyncio

    from tests.lsp_session import Session, run

    async def main():
        session = Session(tmp_path / "no-model")
        await session.start(wait_ready=False)
        await asyncio.wait_for(session.client.shutdown_async(None), 30)
        session.client.exit(None)
        await asyncio.wait_for(session.client.stop(), 60)  # the process ended

    run(main())
