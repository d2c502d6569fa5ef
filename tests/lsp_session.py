"""A real LSP client (pygls) driving the real server in a subprocess, for end-to-end tests."""

from __future__ import annotations

import asyncio
import os
import sys

from lsprotocol import types
from pygls.lsp.client import LanguageClient

SERVER = [sys.executable, "-m", "celeris_complete.cli", "lsp"]


class Session:
    def __init__(self, model_dir, init_options=None, encodings=None, process_id=None, extra_args=(), folders=()):
        self.model_dir = model_dir
        self.init_options = {"model": str(model_dir), **(init_options or {})}
        self.encodings = encodings
        self.process_id = process_id if process_id is not None else os.getpid()
        self.extra_args = list(extra_args)
        self.folders = [types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders]
        self.client = LanguageClient("celeris-tests", "0")
        self.timings: list[dict] = []
        self.messages: list[types.ShowMessageParams] = []
        self.escalated: list = []  # celeris/escalated: the second tier's answers
        self.versions: dict[str, int] = {}

        @self.client.feature("celeris/timings")
        def on_timings(params):
            self.timings.append(params)

        @self.client.feature("celeris/escalated")
        def on_escalated(params):
            self.escalated.append(params)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def on_message(params):
            self.messages.append(params)

    async def start(self, wait_ready: bool = True) -> types.InitializeResult:
        env = {**os.environ, "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent"}
        await self.client.start_io(*SERVER, *self.extra_args, env=env)
        capabilities = types.ClientCapabilities(
            general=types.GeneralClientCapabilities(position_encodings=self.encodings) if self.encodings else None
        )
        self.init = await self.client.initialize_async(
            types.InitializeParams(
                capabilities=capabilities,
                process_id=self.process_id,
                initialization_options=self.init_options,
                workspace_folders=self.folders or None,
            )
        )
        self.client.initialized(types.InitializedParams())
        if wait_ready:
            await self.wait_ready()
        return self.init

    async def wait_message(self, text: str, timeout: float = 60) -> types.ShowMessageParams:
        """The first message shown to the user that contains ``text``, once it has come."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while loop.time() < end:
            for message in self.messages:
                if text in message.message:
                    return message
            await asyncio.sleep(0.05)
        raise TimeoutError(f"no message with {text!r} in {timeout} s: {[m.message for m in self.messages]}")

    async def status(self) -> dict:
        return await self.client.protocol.send_request_async("celeris/status", {})

    async def wait_ready(self, timeout: float = 120) -> dict:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while loop.time() < end:
            status = await self.status()
            if getattr(status, "ready", None) or (isinstance(status, dict) and status.get("ready")):
                return status
            await asyncio.sleep(0.1)
        raise TimeoutError("the server never became ready")

    def open(self, uri: str, text: str, language: str = "python") -> None:
        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text))
        )

    def insert(self, uri: str, line: int, character: int, text: str) -> None:
        self.versions[uri] += 1
        pos = types.Position(line=line, character=character)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[
                    types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos), text=text)
                ],
            )
        )

    def replace(self, uri: str, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        """An incremental change: the text from ``start`` to ``end`` (line, character) becomes ``text``."""
        self.versions[uri] += 1
        rng = types.Range(start=types.Position(*start), end=types.Position(*end))
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangePartial(range=rng, text=text)],
            )
        )

    def replace_all(self, uri: str, text: str) -> None:
        """A full-text change (as a client that does not sync incrementally sends)."""
        self.versions[uri] += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    async def next_edit(self, uri: str, line: int, character: int):
        params = {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}
        return await self.client.protocol.send_request_async("celeris/nextEdit", params)

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    async def inline(self, uri: str, line: int, character: int, invoked: bool = False, selected=None):
        kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
        return await self.client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                context=types.InlineCompletionContext(trigger_kind=kind, selected_completion_info=selected),
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=character),
            )
        )

    async def completion(self, uri: str, line: int, character: int, trigger: types.CompletionTriggerKind | None = None):
        """``trigger``: the context's trigger kind (None: no context, as older clients send)."""
        context = types.CompletionContext(trigger_kind=trigger, trigger_character=" ") if trigger else None
        return await self.client.text_document_completion_async(
            types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line, character),
                context=context,
            )
        )

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
        except Exception:
            pass
        await self.client.stop()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 300))
