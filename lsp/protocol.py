"""pygls's protocol, strict about what a client gets wrong and tidy about what it keeps.

- Every request is answered: a body that is not JSON gets a parse error, one that is
  not a JSON-RPC object an invalid-request error (both with ``"id": null``, as
  JSON-RPC says), unreadable parameters an invalid-params error, and a request
  after ``shutdown`` or for a notification's method an invalid-request error
  (pygls dropped these).
- A client's mistakes are logged on one line; tracebacks are left for the
  server's own faults.
- Changes to a document that is not open are ignored (pygls raised, and showed the
  client an error).
- Nothing is sent once the stream to the client is closed.
- A finished notification handler is forgotten (pygls kept the future of every
  didOpen, didChange and didClose, with its parameters, for the whole session).
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import unquote

from cattrs.errors import ClassValidationError
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
)
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    ResponseErrorMessage,
)
from pygls.protocol.language_server import lsp_method

from .next_edit import CAPABILITY as NEXT_EDIT_CAPABILITY

log = logging.getLogger("celeris.lsp")


def valid_id(msg_id: Any) -> bool:
    return isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))


def known_deviations(data: dict[str, Any]) -> None:
    """Mend, in place, what real clients send differently from the protocol: vscode-languageclient (9.x)
    passes an inline completion's context on as VS Code holds it: ``selectedCompletionInfo.range`` (a
    completion item selected in the menu) as ``[start, end]``, not ``{"start", "end"}``, and the trigger
    kind as VS Code numbers it (Invoke 0, Automatic 1; the protocol: Invoked 1, Automatic 2).  Read as is,
    each such request failed.  A 0 can only mean VS Code's Invoke; a 1 cannot be told from the protocol's
    (our VS Code extension sends the protocol's values)."""
    if data.get("method") != "textDocument/inlineCompletion" or not isinstance(data.get("params"), dict):
        return
    context = data["params"].get("context")
    if isinstance(context, dict) and context.get("triggerKind") == 0:
        context["triggerKind"] = 1
    info = context.get("selectedCompletionInfo") if isinstance(context, dict) else None
    if isinstance(info, dict) and isinstance(info.get("range"), list) and len(info["range"]) == 2:
        info["range"] = {"start": info["range"][0], "end": info["range"][1]}


class CelerisProtocol(LanguageServerProtocol):
    def send_error(self, msg_id: Any, error: JsonRpcException) -> None:
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": error.code, "message": error.message}})

    def handle_body(self, body: bytes) -> None:
        """One message body, as it came off the wire."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:  # RecursionError: nesting too deep to parse
            log.warning("answered a parse error to a body that is not JSON (%d bytes): %s", len(body), exc)
            self.send_error(None, JsonRpcParseError())
            return
        if not isinstance(data, dict):
            log.warning("answered an invalid-request error to a %s instead of an object", type(data).__name__)
            self.send_error(None, JsonRpcInvalidRequest("a message is a JSON object"))
            return
        is_request = "method" in data and "id" in data
        if is_request and not valid_id(data["id"]):
            log.warning("answered an invalid-request error to a request id of type %s", type(data["id"]).__name__)
            self.send_error(None, JsonRpcInvalidRequest("a request id is a string or an integer"))
            return
        if "method" in data and not isinstance(data["method"], str) or data.get("jsonrpc") != "2.0":
            log.warning("ignored a message that is not JSON-RPC 2.0: %.200s", body)
            if is_request:
                self.send_error(data["id"], JsonRpcInvalidRequest("not a JSON-RPC 2.0 request"))
            return
        message = self.structure_message(data)
        if message is None:
            return
        if is_request and not hasattr(message, "id"):  # pygls read it as a notification and dropped the id
            log.warning("answered an invalid-request error to %r sent as a request", data["method"])
            self.send_error(data["id"], JsonRpcInvalidRequest(f"{data['method']} is a notification, not a request"))
            return
        self.handle_message(message)

    def structure_message(self, data: dict[str, Any]):
        """The message as pygls's types, or None (after answering a request) when its fields cannot be read."""
        known_deviations(data)
        try:
            if "id" in data and "error" in data:
                return self._converter.structure(data, ResponseErrorMessage)
            if "id" in data and "method" in data:
                return self._converter.structure(data, self.get_message_type(data["method"]) or JsonRPCRequestMessage)
            if "id" in data:
                response_type = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
                return self._converter.structure(data, response_type)
            return self._converter.structure(data, self.get_message_type(data.get("method", "")) or JsonRPCNotification)
        except (ClassValidationError, ValueError, TypeError, KeyError) as exc:
            error: JsonRpcException = JsonRpcInvalidParams(f"invalid params: {describe(exc)}")
        except Exception:
            log.exception("could not read a %r message", data.get("method"))
            error = JsonRpcInternalError()
        log.warning("%s %r: %s", "answered" if "id" in data else "dropped", data.get("method"), error.message)
        if "id" in data and "method" in data:
            self.send_error(data["id"], error)
        return None

    def handle_message(self, message) -> None:
        if self._shutdown and getattr(message, "method", types.EXIT) != types.EXIT and hasattr(message, "id"):
            log.warning("answered an invalid-request error to %r after shutdown", message.method)
            self.send_error(message.id, JsonRpcInvalidRequest("the server is shutting down"))
            return
        super().handle_message(message)

    def _send_data(self, data) -> None:
        """pygls's, but nothing once the stream to the client is closed (after ``exit``, or the client
        gone): a message sent then (the model's load failing on its thread, say) failed, pygls reported
        the failure with another message, which failed too, and so on, filling stderr until the process
        blocked on it and never exited."""
        out = getattr(self.writer, "_stdout", None)
        if getattr(out, "closed", False):
            log.info("not sent (the stream to the client is closed): %.200s", str(data))
            return
        super()._send_data(data)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        """pygls's, with our requests beyond the protocol under ``capabilities.experimental``."""
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {**(result.capabilities.experimental or {}), **NEXT_EDIT_CAPABILITY}
        return result

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        uri = params.text_document.uri
        if unquote(uri) not in self.workspace.text_documents:
            log.warning("ignored changes to %.200s, which is not open", uri)
            return
        yield from super().lsp_text_document__did_change(params)

    def _execute_handler(self, msg_id, handler, callback, args=None, kwargs=None) -> None:
        def done(future) -> None:
            if self._request_futures.get(msg_id) is future:
                del self._request_futures[msg_id]
            callback(future)

        super()._execute_handler(msg_id, handler, done, args, kwargs)


def describe(exc: BaseException) -> str:
    """The first leaf of a cattrs error tree, on one line."""
    while isinstance(exc, ClassValidationError) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]
