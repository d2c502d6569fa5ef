"""One language server session's state and work: its settings, the engine (loaded on a worker thread),
the documents' snippets and typing cache, the background adaptation, and the completion run for a
request off the message loop (``CelerisServer``)."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from celeris_complete import __version__
from celeris_complete.config import Settings
from celeris_complete.errors import CelerisError
from celeris_complete.system.workspace_files import matches

from .adaptation import Adaptation
from .edit_tier import RemoteNextEdits
from .escalation import Escalation
from .framing import FrameReader, serve_frames
from .protocol import CelerisProtocol
from .typing_cache import TypingCache
from .workspace_index import SnippetSource

log = logging.getLogger("celeris.lsp")



TIMINGS_NOTIFICATION = "celeris/timings"
STATUS_REQUEST = "celeris/status"
DOCUMENT_REQUEST = "celeris/document"
TRIM_EVERY = 100  # model calls between giving free heap memory back (see system.memory.trim_heap)
WINDOW_CHARS = 64 * 1024  # text handed to the engine on each side of the cursor (it windows further)
ENGINE_KEYS = (
    "model", "backend", "device", "quant", "trace", "threads", "trust_remote_code", "endpoint", "api_key_env", "api",
)  # fmt: skip
SNIPPET_KEYS = ("secret_globs", "ignore_globs", "workspace_index", "snippet_tokens", "drafts")
TIER_KEYS = ("escalate_endpoint", "escalate_api", "escalate_api_key_env", "escalate_budget_ms")
EDIT_TIER_KEYS = ("edit_endpoint", "edit_model", "edit_api_key_env", "edit_budget_ms")


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
        self.edit_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="celeris-edits")  # celeris/nextEdit
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
        self.escalation = Escalation(settings, self.warn)  # the second tier, if one is configured
        self.remote_edits = RemoteNextEdits(settings, self.warn)  # edit_endpoint, if one is configured
        self.background: set[asyncio.Task] = set()  # tier requests the client is not waiting for

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
        from celeris_complete.training.adapt import adapt_dir

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
        changed = sorted(k for k in new.values if new.values[k] != self.settings.values[k])
        log.info("settings from %s: %s", source, ", ".join(changed) or "nothing changed")
        reload = reload and any(new.values[k] != self.settings.values[k] for k in ENGINE_KEYS)
        snippets_changed = any(new.values[k] != self.settings.values[k] for k in SNIPPET_KEYS)
        if any(new.values[k] != self.settings.values[k] for k in TIER_KEYS):
            self.escalation.stop()
            self.escalation = Escalation(new, self.warn)
        if any(new.values[k] != self.settings.values[k] for k in EDIT_TIER_KEYS):
            self.remote_edits.stop()
            self.remote_edits = RemoteNextEdits(new, self.warn)
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
