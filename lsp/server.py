"""The celeris-complete language server (pygls).

Data path: the client's buffer (incremental sync, kept by pygls) -> the text
around the cursor -> the engine, on one worker thread off the message loop ->
the completion -> ``textDocument/inlineCompletion`` items (or
``textDocument/completion`` items for older clients), plus a timings
notification.  A newer request for a document supersedes the older one, which
stops at its next refinement step.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path
from pygls.workspace.position_codec import ServerTextPosition

from celeris_complete.checks.grammar import grammars
from celeris_complete.config import Settings, load_settings
from celeris_complete.engine import InfillRequest
from celeris_complete.errors import CelerisError
from celeris_complete.system.memory import trim_heap
from celeris_complete.system.parent_watch import exit_with_parent

from .document import use_fast_documents
from .escalation import ESCALATED_NOTIFICATION
from .next_edit import NEXT_EDIT_REQUEST, as_result, predict, remote_prompt, remote_result, snapshot
from .session import (
    DOCUMENT_REQUEST,
    STATUS_REQUEST,
    TRIM_EVERY,
    CelerisServer,
)

log = logging.getLogger("celeris.lsp")


def make_server(settings: Settings | None = None) -> CelerisServer:
    server = CelerisServer(settings or load_settings(environ=os.environ))

    @server.feature(types.INITIALIZE)
    def initialize(ls: CelerisServer, params: types.InitializeParams) -> None:
        ls.apply_settings(params.initialization_options, "initializationOptions", reload=False)
        use_fast_documents(ls.workspace)
        ls.load_engine()
        folders = [f.uri for f in params.workspace_folders or []]
        if not folders and (params.root_uri or params.root_path):
            folders = [params.root_uri or Path(params.root_path).as_uri()]
        ls.watch_workspace(folders)
        ls.adapt_to_workspace()
        if params.process_id:
            exit_with_parent(params.process_id)  # the editor that started us

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: CelerisServer, params: types.DidChangeConfigurationParams) -> None:
        ls.apply_settings(params.settings, "workspace/didChangeConfiguration")

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls: CelerisServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        for folder in params.event.removed:
            path = to_fs_path(folder.uri)
            if path:
                ls.snippets.unwatch(Path(path))
            ls.folders = [f for f in ls.folders or [] if f != folder.uri]
        ls.watch_workspace([f.uri for f in params.event.added])

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: CelerisServer, params: Any = None) -> None:
        ls.snippets.stop()
        ls.adaptation.stop()
        ls.escalation.stop()
        ls.remote_edits.stop()

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CelerisServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.typing.forget(uri)
        ls.generation.pop(uri, None)
        ls.escalation.supersede(uri)  # a tier request for it is stale
        key, why = ls.key(uri)
        if why is None:
            ls.model_thread.submit(ls.snippets.closed, key)  # after any call still using the buffer
        ls.keys.pop(uri, None)

    @server.feature(STATUS_REQUEST)
    def status(ls: CelerisServer, params: Any = None) -> dict:
        engine = ls.engine
        return {
            "ready": ls.engine_ready.is_set(),
            "model_loaded": engine is not None,
            "error": ls.engine_error,
            "model": str(engine.path) if engine else None,
            "backend": engine.backend if engine else None,
            "requests": ls.requests,
            "model_calls": ls.model_calls,
            "typing_cache": {"hits": ls.typing.hits, "misses": ls.typing.misses},
            "context_cache": vars(engine.cache.stats).copy() if engine else None,
            "snippet_index": {
                "ready": all(i.ready.is_set() for i in ls.snippets.indexers),
                "folders": [str(i.root) for i in ls.snippets.indexers],
                "files": len(ls.snippets.index.sources()),
                "chunks": len(ls.snippets.index),
            },
            "adaptation": ls.adaptation.status(),
            "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in ls.settings.values.items()},
            # The threshold in force: the user's, or the ones the model's calibration recommends per place.
            "min_confidence_in_force": engine.min_confidence_in_force() if engine else None,
            "calibrated": engine is not None and engine.calibrator is not None,
            "tier": ls.escalation.status(),  # the second tier: asked, answered, failed (null: none configured)
            "grammars": grammars(),  # the languages whose answers a parser judges (checks/grammar.py)
        }

    @server.feature(DOCUMENT_REQUEST)
    def document(ls: CelerisServer, params: Any = None) -> dict | None:
        """The server's copy of an open document ({"uri": ...} -> uri, version, text), or null: lets a client
        (and the fuzzing tests) check that incremental edits were applied as it applied them."""
        uri = getattr(params, "uri", None)
        doc = ls.document(uri) if isinstance(uri, str) else None
        if doc is None:
            return None
        return {"uri": uri, "version": doc.version, "text": doc.source}

    async def complete_at(
        ls: CelerisServer, uri: str, position: types.Position, automatic: bool, selected=None, alternatives: int = 1
    ) -> tuple[list[str], types.Range | None, float | None]:
        """Completions at the cursor (text to insert there), the range they replace, and the first one's
        confidence (None: not known, or another tier's answer)."""
        t0 = time.perf_counter()
        ls.requests += 1
        ls.adaptation.typing()
        tier_generation = ls.escalation.supersede(uri)  # a newer request: the tier's older one is stale
        if ls.engine is None:
            if ls.engine_error:
                log.info("no completion for %s: the model failed to load (%s)", uri, ls.engine_error)
            return [], None, None
        if (why := ls.skipped(uri)) is not None:
            log.info("no completion for %s: %s", uri, why)
            return [], None, None
        around = ls.around_cursor(uri, position)
        if around is None:
            return [], None, None
        prefix, suffix, file_start, file_end = around
        replace = types.Range(start=position, end=position)
        lead = ""
        if selected is not None:
            # The completion popup has an item selected: complete as if it were accepted.
            doc = ls.document(uri)
            start = doc.offset_at_position(selected.range.start)
            typed = doc.source[start : doc.offset_at_position(position)]
            if len(typed) <= len(prefix) and prefix.endswith(typed):
                prefix = prefix[: len(prefix) - len(typed)] + selected.text
                lead = selected.text
                replace = types.Range(start=selected.range.start, end=position)
        rest_of_line = suffix.split("\n", 1)[0]
        if automatic and len(rest_of_line.strip()) > ls.settings.max_chars_after_cursor:
            return [], None, None
        cached = ls.typing.lookup(uri, prefix, suffix)
        # (the second tier's answer also for a request the user made: it is what the tier had to say here)
        if cached is not None and (alternatives == 1 or cached[1] == "escalated"):
            text, tier = cached
            total_ms = round((time.perf_counter() - t0) * 1e3, 3)
            ls.send_timings(uri, {"total_ms": total_ms, "source": "typing-cache", "tier": tier})
            return [lead + text], replace, None
        engine = ls.engine
        key = ls.key(uri)[0]
        # Other open documents feed the snippets and the drafts' line table.
        documents = ls.open_documents() if ls.settings.snippet_tokens > 0 or ls.settings.drafts else {}
        cheap_drafts = ls.typing.drafts(uri, prefix) if ls.settings.drafts else []
        chosen = []
        language = ls.document(uri).language_id or uri  # Python answers are checked by the parser

        def call(should_cancel):
            ls.calls_started += 1
            if ls.calls_started % TRIM_EVERY == 0:
                trim_heap()
            if documents or ls.snippets.indexers:
                ls.snippets.sync_open(documents, key)
                if ls.settings.snippet_tokens > 0:
                    chosen.extend(ls.snippets.choose(key, prefix))
            return engine.complete(
                InfillRequest(
                    prefix,
                    suffix,
                    file_start=file_start,
                    file_end=file_end,
                    deadline_ms=ls.settings.budget_ms,
                    should_cancel=should_cancel,
                    snippets=[c.text for c in chosen],
                    lines=ls.snippets.index.lines,
                    source=key,
                    alternatives=alternatives,  # decoded together, inside the one budget
                    drafts=cheap_drafts,
                    language=language,
                    # A keystroke must not wait for new samples to replace an answer the compiler blames
                    # (it is withheld instead); a request the user made may.
                    repair_samples=not automatic,
                )
            )

        from celeris_complete.engine import Cancelled

        try:
            done = await ls.run_model(uri, call)
        except Cancelled:
            return [], None, None
        except CelerisError as exc:  # a remote endpoint's failure; local engines raise none here
            ls.report_failure(exc)
            return [], None, None
        if ls.failing is not None:
            log.info("completions work again")
            ls.failing = None
        ls.model_calls += 1
        texts = []
        for text in (done.text, *done.alternatives):
            if text.strip() and text not in texts:
                texts.append(text)
        # Quiet when unsure: an automatic answer the model is unlikely to have right is not shown (nor
        # kept for the keystrokes after it); one the user asked for is.
        unsure = done.confidence is not None and done.confidence < done.min_confidence
        quiet = automatic and unsure
        # ...and asked of the second tier, if there is one: later for a keystroke, now for a request the
        # user made (the local answers stand after the tier's).
        tier = "local"
        escalating = unsure and ls.escalation.ready() and not lead
        if escalating:
            tier_req = InfillRequest(
                prefix, suffix, file_start=file_start, file_end=file_end, deadline_ms=ls.settings.escalate_budget_ms,
                snippets=[c.text for c in chosen], language=language,
            )  # fmt: skip
            if automatic:
                doc = ls.document(uri)
                later = escalate_later(ls, uri, tier_generation, doc.version if doc else None, position, tier_req)
                task = asyncio.ensure_future(later)
                ls.background.add(task)
                task.add_done_callback(ls.background.discard)
            else:
                wait_ms = ls.settings.escalate_budget_ms
                answered = await ls.escalation.ask(uri, tier_generation, tier_req, wait_ms=wait_ms)
                if answered is not None:
                    texts = [answered.text, *(t for t in texts if t != answered.text)]
                    tier = "escalated"
        if texts and not quiet:
            ls.typing.store(uri, prefix, suffix, texts[0], tier)
        ls.send_timings(
            uri,
            {
                "total_ms": round((time.perf_counter() - t0) * 1e3, 3),
                "engine_ms": {k: v for k, v in done.timings_ms.items() if k != "steps"},
                "steps": done.steps,
                "cache": done.cache,
                "source": "model",
                "snippets": [{"source": c.source, "line": c.line} for c in chosen],
                "snippet_tokens": done.snippet_tokens,
                "draft": done.draft,
                "syntax": done.syntax,
                "raw": done.raw,
                "features": done.features,
                "confidence": done.confidence,
                "min_confidence": done.min_confidence,  # the threshold in force at the cursor's place
                "shown": bool(texts) and not quiet,
                "hidden": done.text if quiet else None,
                "tier": tier,  # who answered what is shown first: "local" or "escalated"
                "escalating": escalating and automatic,  # the second tier was asked; its answer may follow
            },
        )
        if quiet:
            return [], None, None
        return [lead + t for t in texts], replace, (done.confidence if tier == "local" else None)

    async def escalate_later(
        ls: CelerisServer, uri: str, generation: int, version: Any, position: types.Position, req: InfillRequest
    ) -> None:
        """The second tier's answer to a keystroke the local answer stayed quiet on: kept for the next
        request at that place and announced (``celeris/escalated``), if the document has not changed and
        no newer request came for it meanwhile."""
        t0 = time.perf_counter()
        done = await ls.escalation.ask(uri, generation, req)
        doc = ls.document(uri)
        if done is None or doc is None or doc.version != version or not ls.escalation.current(uri, generation):
            return
        ls.typing.store(uri, req.prefix, req.suffix, done.text, "escalated")
        tier_ms = round((time.perf_counter() - t0) * 1e3, 3)
        where = {"line": position.line, "character": position.character}
        ls.protocol.notify(
            ESCALATED_NOTIFICATION, {"uri": uri, "version": version, "position": where, "text": done.text}
        )
        ls.send_timings(uri, {"total_ms": tier_ms, "source": "tier", "tier": "escalated", "text": done.text})

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: CelerisServer, params: types.InlineCompletionParams):
        invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        texts, replace, _ = await complete_at(
            ls,
            params.text_document.uri,
            params.position,
            automatic=not invoked,
            selected=params.context.selected_completion_info,
            alternatives=ls.settings.alternatives if invoked else 1,
        )
        items = [types.InlineCompletionItem(insert_text=t, range=replace) for t in texts]
        return types.InlineCompletionList(items=items)

    @server.feature(NEXT_EDIT_REQUEST)
    async def next_edit(ls: CelerisServer, params: Any = None) -> dict | None:
        """After the user's edits, the next one in the document (next_edit.py), or null."""
        uri = getattr(getattr(params, "textDocument", None), "uri", None)
        position = getattr(params, "position", None)
        line = getattr(position, "line", None)
        if not isinstance(uri, str) or not (line is None or isinstance(line, int) and line >= 0):
            raise JsonRpcInvalidParams("celeris/nextEdit takes {textDocument: {uri}, position: {line, character}}")
        doc = ls.document(uri)
        if doc is None or ls.key(uri)[1] is not None:  # not open; a secret or ignored file
            return None
        snap = snapshot(doc)
        if snap is None:
            return None
        found = None
        if ls.settings.next_edit_local:
            found = await asyncio.get_running_loop().run_in_executor(ls.edit_thread, predict, snap, line)
        if found is not None or not ls.remote_edits.ready():
            return as_result(doc, snap, found) if ls.document(uri) is doc else None
        # Nothing propagated: the edit endpoint, if one is configured, rewrites the lines near the cursor.
        character = getattr(position, "character", 0)
        path = os.path.basename(to_fs_path(uri) or uri)
        prompt, lo, hi = remote_prompt(snap, line or 0, character if isinstance(character, int) else 0, path)
        region = await ls.remote_edits.ask(prompt)
        if region is None or ls.document(uri) is not doc:
            return None
        return remote_result(doc, snap, lo, hi, region)

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
    async def completion(ls: CelerisServer, params: types.CompletionParams):
        uri, position = params.text_document.uri, params.position
        # A menu opened by a trigger character or by typing (VS Code's quick suggestions) is a keystroke's
        # request: quiet when unsure, the second tier later; one the user asked for (or a client that does
        # not say) is answered now.
        context = params.context
        automatic = context is not None and context.trigger_kind != types.CompletionTriggerKind.Invoked
        texts, _, confidence = await complete_at(ls, uri, position, automatic=automatic)
        doc = ls.document(uri)
        if not texts or doc is None:  # (closed while the model ran)
            return types.CompletionList(is_incomplete=True, items=[])
        # Replace the word being typed, so that the client's filtering matches the item.
        line = doc.lines[position.line] if position.line < len(doc.lines) else ""
        cursor = doc.offset_at_position(position) - doc.offset_at_position(types.Position(position.line, 0))
        start = cursor
        while start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
            start -= 1
        word = line[start:cursor]
        start_pos = doc.position_to_client_units(ServerTextPosition(position.line, start))
        items = []
        for n, text in enumerate(texts):
            label = (word + text).split("\n", 1)[0].strip() or text.strip()
            sure = confidence if n == 0 else None  # how sure the first answer is (the menu shows "73%")
            details = types.CompletionItemLabelDetails(description=f"{sure:.0%}") if sure is not None else None
            items.append(
                types.CompletionItem(
                    label=label[:80],
                    label_details=details,
                    data={"confidence": sure} if sure is not None else None,
                    kind=types.CompletionItemKind.Text,
                    detail="celeris-complete",
                    insert_text_format=types.InsertTextFormat.PlainText,
                    text_edit=types.TextEdit(range=types.Range(start=start_pos, end=position), new_text=word + text),
                    filter_text=word + text,
                    sort_text="0",
                )
            )
        return types.CompletionList(is_incomplete=True, items=items)

    return server


def serve(settings: Settings, tcp: bool = False, host: str = "127.0.0.1", port: int = 2087) -> None:
    server = make_server(settings)
    if tcp:
        server.start_tcp(host, port)
    else:
        server.start_io()
