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
import ctypes
import ctypes.util
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace.position_codec import ServerTextPosition

from celeris_complete import __version__
from celeris_complete.config import Settings, load_settings
from celeris_complete.errors import CelerisError
from celeris_complete.parent_watch import exit_with_parent

from .adaptation import Adaptation
from .document import use_fast_documents
from .framing import FrameReader, serve_frames
from .protocol import CelerisProtocol
from .typing_cache import TypingCache
from .workspace_index import SnippetSource, matches

log = logging.getLogger("celeris.lsp")

TIMINGS_NOTIFICATION = "celeris/timings"
STATUS_REQUEST = "celeris/status"
DOCUMENT_REQUEST = "celeris/document"
TRIM_EVERY = 100  # model calls between giving free heap memory back (see release_free_memory)
WINDOW_CHARS = 64 * 1024  # text handed to the engine on each side of the cursor (it windows further)
ENGINE_KEYS = (
    "model", "backend", "device", "quant", "trace", "threads", "trust_remote_code", "endpoint", "api_key_env", "api",
)  # fmt: skip
SNIPPET_KEYS = ("secret_globs", "ignore_globs", "workspace_index", "snippet_tokens", "drafts")


class CelerisServer(LanguageServer):
    def __init__(self, settings: Settings) -> None:
        super().__init__(
            "celeris-complete",
            __version__,
            protocol_cls=CelerisProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.settings = settings
        self.engine = None
        self.engine_error: str | None = None
        self.engine_ready = threading.Event()
        self.model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="celeris-model")
        self.generation: dict[str, int] = {}
        self.typing = TypingCache()
        self.snippets = SnippetSource()
        self.folders: list[str] | None = None  # the workspace folders' URIs, once initialized
        self.keys: dict[str, tuple[str, str | None]] = {}  # uri -> (snippet index key, why skipped)
        self.requests = 0
        self.model_calls = 0
        self.calls_started = 0
        self.adaptation = Adaptation(self.switch_model, on_failed=lambda m: self.warn(f"adapting the model: {m}"))
        self.failing: str | None = None  # the kind of the last completion failure shown to the user
        self.announced: set[str] = set()  # remote endpoints the user has been told about

    def start_io(self, stdin=None, stdout=None) -> None:
        """pygls's stdio loop with a reader that survives wrong Content-Length headers (framing.py)."""
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        reader = FrameReader(stdin or sys.stdin.buffer)
        try:
            asyncio.run(serve_frames(reader, self.protocol.handle_body, self._stop_event))
        except BrokenPipeError:
            log.error("the connection to the client is lost; exiting")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    # ---- engine ---------------------------------------------------------------------------
    def load_engine(self) -> None:
        """Load the model on the worker thread; the server answers (emptily) meanwhile."""
        self.engine_ready.clear()
        self.engine, self.engine_error = None, None
        self.typing = TypingCache()  # the previous engine's answers
        settings = self.settings

        def load() -> None:
            try:
                from celeris_complete.engine import Engine

                self.engine = Engine(settings, trace_in_background=True)
                log.info("model loaded from %s", self.engine.path)
                self.announce(self.engine)
            except CelerisError as exc:
                self.engine_error = str(exc)
            except Exception as exc:  # never let a broken model take the server down
                self.engine_error = f"{type(exc).__name__}: {exc}"
            finally:
                self.engine_ready.set()
            if self.engine_error:
                log.error("the model failed to load: %s", self.engine_error)
                self.window_show_message(
                    types.ShowMessageParams(
                        type=types.MessageType.Error,
                        message=f"celeris-complete: the model failed to load: {self.engine_error}",
                    )
                )

        self.model_thread.submit(load)

    def announce(self, engine) -> None:
        """Tell the user, once per endpoint, that completions go to a server off this machine."""
        notice = getattr(engine.impl, "announcement", lambda: None)()
        if notice and engine.path not in self.announced:
            self.announced.add(engine.path)
            log.info(notice)
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=notice))

    def report_failure(self, exc: CelerisError) -> None:
        """A completion failed (a remote server down, refusing the key, busy...): shown once, then logged."""
        kind = getattr(exc, "kind", "error")
        log.warning("no completion: %s", exc)
        if kind != self.failing:
            self.failing = kind
            self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=f"celeris-complete: {exc}")
            )

    def adapt_to_workspace(self) -> None:
        """Start adapting the model to the first workspace folder, when the setting asks for it."""
        if not self.settings.adapt:
            self.adaptation.stop()  # turned off: its checkpoint stays for the next time
            return
        if self.adaptation.state in ("training", "ready") or not self.folders:
            return
        root = to_fs_path(self.folders[0])
        if not root or not Path(root).is_dir():
            return
        from celeris_complete.adapt import adapt_dir

        home = adapt_dir(Path(root))
        home.mkdir(parents=True, exist_ok=True)
        self.adaptation.start(
            Path(root),
            self.settings.model,
            self.settings.adapt_minutes,
            home / "adapt.log",
            memory_mb=self.settings.adapt_memory_mb,
        )

    def switch_model(self, model_dir: Path) -> None:
        """Load ``model_dir`` beside the current model (completions go on meanwhile), then answer with it."""
        from celeris_complete.engine import Engine

        settings = self.settings.with_overrides({"model": str(model_dir)}, "adaptation")
        engine = Engine(settings)
        self.settings, self.engine = settings, engine
        self.typing = TypingCache()  # answers of the previous model
        self.window_log_message(
            types.LogMessageParams(
                type=types.MessageType.Info,
                message=f"celeris-complete: now completing with the model adapted to this workspace ({model_dir})",
            )
        )

    def apply_settings(self, overrides: Any, source: str, reload: bool = True) -> None:
        if not overrides:
            return
        if not isinstance(overrides, dict):
            self.warn(f"{source}: expected an object of settings, got {type(overrides).__name__}")
            return
        overrides = overrides.get("celeris", overrides)  # {"celeris": {...}} or the settings themselves
        if isinstance(overrides, dict) and "trust_remote_code" in overrides:
            # A workspace's own settings could name a model folder in it and run its code: only the
            # command line (--trust-remote-code) or the user's files may allow that.
            overrides = {k: v for k, v in overrides.items() if k != "trust_remote_code"}
            self.warn(f"{source}: trust_remote_code is ignored here; pass --trust-remote-code to the server")
        try:
            new = self.settings.with_overrides(overrides, source)
        except CelerisError as exc:
            self.warn(str(exc))
            return
        reload = reload and any(new.values[k] != self.settings.values[k] for k in ENGINE_KEYS)
        snippets_changed = any(new.values[k] != self.settings.values[k] for k in SNIPPET_KEYS)
        self.settings = new
        self.keys.clear()
        if snippets_changed and self.folders is not None:
            self.snippets.stop()  # the new globs and switches apply to everything indexed from now
            self.snippets = SnippetSource()
            self.watch_workspace(self.folders)
        if reload:
            self.load_engine()
        elif self.engine is not None:
            self.engine.use_settings(new)
        if self.folders is not None:
            self.adapt_to_workspace()

    def warn(self, message: str) -> None:
        log.warning(message)
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))

    # ---- what to complete -----------------------------------------------------------------
    def skipped(self, uri: str) -> str | None:
        """Why a document is never completed (nor used for snippets), or None."""
        return self.key(uri)[1]

    def key(self, uri: str) -> tuple[str, str | None]:
        """(the document's key in the snippet index, why it is skipped or None), looked up once."""
        known = self.keys.get(uri)
        if known is not None:
            return known
        path = to_fs_path(uri) or uri
        why = None
        if matches(path, self.settings.secret_globs):
            why = "looks like a secret"
        elif matches(path, self.settings.ignore_globs):
            why = "ignored by ignore_globs"
        key = path
        if uri.startswith("file:"):
            try:
                key = str(Path(path).resolve())
            except (OSError, RuntimeError):
                pass
        self.keys[uri] = (key, why)
        return key, why

    def watch_workspace(self, folders: list[str]) -> None:
        self.folders = list(dict.fromkeys([*(self.folders or []), *folders]))
        if not (self.settings.workspace_index and (self.settings.snippet_tokens > 0 or self.settings.drafts)):
            return  # the index serves snippets and the drafts' line table
        paths = [Path(p) for p in (to_fs_path(f) for f in folders) if p]
        self.snippets.watch(paths, (*self.settings.secret_globs, *self.settings.ignore_globs))

    def open_documents(self) -> dict[str, tuple[str, object, str]]:
        """key -> (text, version, why skipped or ''), read on the message loop (cheap: no copies)."""
        out = {}
        for uri, doc in list(self.workspace.text_documents.items()):  # keyed by unquoted URIs
            key, why = self.key(uri)
            out[key] = (doc.source, doc.version, why or "")
        return out

    def document(self, uri: str):
        """The open document at ``uri``, or None (pygls keys them by the URI with %-escapes undone)."""
        return self.workspace.text_documents.get(unquote(uri))

    def around_cursor(self, uri: str, position: types.Position) -> tuple[str, str, bool, bool] | None:
        """(prefix, suffix, prefix reaches the file start, suffix reaches the file end), or None."""
        doc = self.document(uri)
        if doc is None:
            return None
        lines = doc.lines
        if position.line < 0 or position.character < 0 or position.line > len(lines):
            return None
        if position.line == len(lines) and position.character > 0:
            return None
        source = lines.text
        offset = doc.offset_in(lines, position)
        start, end = max(0, offset - WINDOW_CHARS), min(len(source), offset + WINDOW_CHARS)
        prefix, suffix = source[start:offset], source[offset:end]
        if "\x00" in prefix[-4096:] or "\x00" in suffix[:4096]:
            return None  # binary content
        return prefix, suffix, start == 0, end == len(source)

    async def run_model(self, uri: str, call) -> Any:
        """Run ``call(should_cancel)`` on the model thread; superseded or cancelled calls stop early."""
        generation = self.generation.get(uri, 0) + 1
        self.generation[uri] = generation
        cancelled = threading.Event()

        def should_cancel() -> bool:
            return cancelled.is_set() or self.generation.get(uri) != generation

        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.model_thread, call, should_cancel)
        except asyncio.CancelledError:
            cancelled.set()  # $/cancelRequest: the worker stops at its next step
            raise

    def send_timings(self, uri: str, payload: dict) -> None:
        self.protocol.notify(TIMINGS_NOTIFICATION, {"uri": uri, **payload})


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

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CelerisServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.typing.forget(uri)
        ls.generation.pop(uri, None)
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
    ) -> tuple[list[str], types.Range | None]:
        """Completions at the cursor (text to insert there), and the range they replace."""
        t0 = time.perf_counter()
        ls.requests += 1
        ls.adaptation.typing()
        if ls.engine is None:
            if ls.engine_error:
                log.info("no completion for %s: the model failed to load (%s)", uri, ls.engine_error)
            return [], None
        if (why := ls.skipped(uri)) is not None:
            log.info("no completion for %s: %s", uri, why)
            return [], None
        around = ls.around_cursor(uri, position)
        if around is None:
            return [], None
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
            return [], None
        if alternatives == 1 and (cached := ls.typing.lookup(uri, prefix, suffix)) is not None:
            ls.send_timings(uri, {"total_ms": round((time.perf_counter() - t0) * 1e3, 3), "source": "typing-cache"})
            return [lead + cached], replace
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
                release_free_memory()
            if documents or ls.snippets.indexers:
                ls.snippets.sync_open(documents, key)
                if ls.settings.snippet_tokens > 0:
                    chosen.extend(ls.snippets.choose(key, prefix))
            return engine.complete(
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

        from celeris_complete.engine import Cancelled

        try:
            done = await ls.run_model(uri, call)
        except Cancelled:
            return [], None
        except CelerisError as exc:  # a remote endpoint's failure; local engines raise none here
            ls.report_failure(exc)
            return [], None
        if ls.failing is not None:
            log.info("completions work again")
            ls.failing = None
        ls.model_calls += 1
        texts = []
        for text in (done.text, *done.alternatives):
            if text.strip() and text not in texts:
                texts.append(text)
        if texts:
            ls.typing.store(uri, prefix, suffix, texts[0])
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
            },
        )
        return [lead + t for t in texts], replace

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: CelerisServer, params: types.InlineCompletionParams):
        invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        texts, replace = await complete_at(
            ls,
            params.text_document.uri,
            params.position,
            automatic=not invoked,
            selected=params.context.selected_completion_info,
            alternatives=ls.settings.alternatives if invoked else 1,
        )
        items = [types.InlineCompletionItem(insert_text=t, range=replace) for t in texts]
        return types.InlineCompletionList(items=items)

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
    async def completion(ls: CelerisServer, params: types.CompletionParams):
        uri, position = params.text_document.uri, params.position
        texts, _ = await complete_at(ls, uri, position, automatic=False)
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
        for text in texts:
            label = (word + text).split("\n", 1)[0].strip() or text.strip()
            items.append(
                types.CompletionItem(
                    label=label[:80],
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


def _malloc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """Give the C heap's free pages back to the system.  Contexts of varying size make the allocator
    keep freed tensor memory (glibc raises its mmap threshold after large frees), which otherwise
    shows as resident memory that grows over a long editing session."""
    if _TRIM is not None:
        _TRIM(0)


def serve(settings: Settings, tcp: bool = False, host: str = "127.0.0.1", port: int = 2087) -> None:
    server = make_server(settings)
    if tcp:
        server.start_tcp(host, port)
    else:
        server.start_io()
