"""Snippets for the context from other open documents and from workspace files.

Workspace files are indexed on a background thread and kept fresh by a
watchdog observer.  Source files only (by suffix, ``SOURCE_SUFFIXES``, plus
Makefile-like names); files that ``.gitignore`` excludes (at any level), the
``.git`` folder, files matching ``ignore_globs`` and anything that looks like
a secret (``secret_globs``) are never read.  Open documents are indexed from
the editor's buffer, lazily, when a completion in another document asks.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from celeris_complete.checks.languages import family_of
from celeris_complete.drafts.snippets import MAX_FILE_CHARS, Snippet, SnippetIndex
from celeris_complete.system.memory import release_freed_memory
from celeris_complete.system.workspace_files import WorkspaceFiles

log = logging.getLogger("celeris.lsp")

MAX_FILES = 5_000  # files indexed per workspace folder
QUERY_LINES = 24  # lines before the cursor's line that choose the snippets
QUERY_STRIDE = 8  # the query moves in steps of this many lines
SNIPPETS_PER_REQUEST = 2
RELEASE_AFTER_REMOVALS = 50  # files removed before freed memory is given back (once the queue is idle)


class WorkspaceIndexer(WorkspaceFiles):
    """Indexes one folder tree's wanted files into a ``SnippetIndex`` and follows its changes."""

    def __init__(self, root: Path, index: SnippetIndex, skip_globs: tuple[str, ...]) -> None:
        super().__init__(root, skip_globs)
        self.index = index
        self.events: queue.Queue[tuple[str, Path | None]] = queue.Queue()
        self.ready = threading.Event()
        self.observer = None
        self.stopped = False
        self.files = 0

    def start(self) -> None:
        threading.Thread(target=self._work, name="celeris-index", daemon=True).start()

    def _observe(self) -> None:
        """Follow changes on disk (started on the indexing thread: watchdog walks the tree to do it)."""
        try:
            from watchdog import events
            from watchdog.observers import Observer

            # Only what changes a file's text.  Without a filter inotify also reports every open and
            # read-only close, and a tree that many processes read (a virtual environment under the
            # root: every import opens files) floods the kernel queue; on an overflow watchdog walks
            # the tree again, and with ~8,000 folders that walk's own opens overflow it again: a core
            # spent for ever on a workspace nobody touches.
            wanted = [
                events.FileCreatedEvent, events.FileModifiedEvent, events.FileClosedEvent,
                events.FileDeletedEvent, events.FileMovedEvent,
                events.DirCreatedEvent, events.DirDeletedEvent, events.DirMovedEvent,
            ]
            observer = Observer()
            observer.schedule(_Handler(self.events), str(self.root), recursive=True, event_filter=wanted)
            observer.daemon = True
            observer.start()
            self.observer = observer
        except Exception as exc:  # inotify limits, unsupported file systems: index once, without updates
            log.warning("not watching %s for changes: %s", self.root, exc)

    def stop(self) -> None:
        self.stopped = True
        if self.observer is not None:
            self.observer.stop()
        self.events.put(("stop", None))

    def scan(self) -> None:
        """Index every wanted file under the root (and forget files no longer wanted)."""
        seen: set[str] = set()
        for path in self.walk():
            if len(seen) >= MAX_FILES:
                log.warning("indexed the first %d files under %s only", MAX_FILES, self.root)
                break
            if self._index_file(path):
                seen.add(str(path))
            time.sleep(0.001)  # let the model thread have the interpreter
        for source in self.index.sources():
            if source.startswith(str(self.root) + os.sep) and source not in seen:
                self.index.remove(source)
        self.files = len(seen)

    def _index_file(self, path: Path) -> bool:
        try:
            if not path.is_file() or path.stat().st_size > MAX_FILE_CHARS:
                return False
            data = path.read_bytes()
        except OSError:
            return False
        if b"\x00" in data[:8192]:
            return False
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return self.index.set_file(str(path), text)

    def _work(self) -> None:
        self._observe()
        if self.stopped and self.observer is not None:
            self.observer.stop()
        try:
            self.scan()
        except Exception:
            log.exception("indexing %s failed", self.root)
        finally:
            self.ready.set()
        log.info("indexed %d files under %s", self.files, self.root)
        removed = 0  # files dropped from the index since freed memory was last given back
        while True:
            if removed >= RELEASE_AFTER_REMOVALS and self.events.empty():
                release_freed_memory()
                removed = 0
            kind, path = self.events.get()
            if kind == "stop":
                return
            before = self.index.file_count
            try:
                if path is None:
                    continue
                if path.name == ".gitignore":
                    if path.parent == self.root or self.wanted(path.parent, is_dir=True):
                        self._drain_rescans()
                        self.scan()  # what is ignored changed: start over
                elif kind == "gone-folder":
                    prefix = str(path) + os.sep
                    for source in self.index.sources():
                        if source.startswith(prefix):
                            self.index.remove(source)
                elif kind == "gone" or not self.wanted(path) or not self.is_source(path):
                    self.index.remove(str(path))
                else:
                    self._index_file(path)
            except Exception:
                log.exception("indexing %s failed", path)
            removed += max(0, before - self.index.file_count)

    def _drain_rescans(self) -> None:
        """Several .gitignore events in a row need one rescan: drop the other queued ones."""
        kept = []
        while True:
            try:
                item = self.events.get_nowait()
            except queue.Empty:
                break
            if item[1] is None or item[1].name != ".gitignore":
                kept.append(item)
        for item in kept:
            self.events.put(item)


class _Handler:
    """A watchdog event handler that only queues paths (the indexing thread does the work)."""

    def __init__(self, events: queue.Queue) -> None:
        self.events = events

    def dispatch(self, event) -> None:
        kind = event.event_type
        if event.is_directory:
            if kind in ("deleted", "moved"):
                self.events.put(("gone-folder", Path(os.fsdecode(event.src_path))))
            return
        if kind in ("created", "modified", "closed"):
            self.events.put(("changed", Path(os.fsdecode(event.src_path))))
        elif kind == "deleted":
            self.events.put(("gone", Path(os.fsdecode(event.src_path))))
        elif kind == "moved":
            self.events.put(("gone", Path(os.fsdecode(event.src_path))))
            self.events.put(("changed", Path(os.fsdecode(event.dest_path))))


class SnippetSource:
    """What the server asks for snippets: the workspace folders' files plus the open documents."""

    def __init__(self) -> None:
        self.index = SnippetIndex()
        self.indexers: list[WorkspaceIndexer] = []
        self.open_versions: dict[str, object] = {}
        self._chosen: dict[str, tuple[tuple, list[Snippet]]] = {}

    def watch(self, folders: Iterable[Path], skip_globs: tuple[str, ...]) -> None:
        for folder in folders:
            if folder.is_dir() and not any(i.root == folder.resolve() for i in self.indexers):
                indexer = WorkspaceIndexer(folder, self.index, skip_globs)
                self.indexers.append(indexer)
                indexer.start()

    def unwatch(self, folder: Path) -> None:
        root = folder.resolve()
        for indexer in [i for i in self.indexers if i.root == root]:
            indexer.stop()
            self.indexers.remove(indexer)
            for source in self.index.sources():
                if source.startswith(str(root) + os.sep):
                    self.index.remove(source)

    def stop(self) -> None:
        for indexer in self.indexers:
            indexer.stop()
        self.indexers.clear()

    def sync_open(self, documents: Mapping[str, tuple[str, object, str]], current: str) -> None:
        """``documents``: key -> (text, version, why skipped or ''); the current one is not indexed
        (its own text is already in the context)."""
        for key, (text, version, skip) in documents.items():
            if key == current or self.open_versions.get(key) == version:
                continue
            self.open_versions[key] = version
            if skip:
                self.index.remove(key)
            else:
                self.index.set_file(key, text)

    def closed(self, key: str) -> None:
        self.open_versions.pop(key, None)
        self._chosen.pop(key, None)
        self.index.remove(key)
        path = Path(key)
        for indexer in self.indexers:
            if indexer.is_source(path) and indexer.wanted(path):
                indexer.events.put(("changed", path))  # back to what is on disk

    def choose(self, key: str, prefix: str, limit: int = SNIPPETS_PER_REQUEST) -> list[Snippet]:
        """Snippets for a completion in ``key``, chosen from the lines before the cursor's line, cut
        back to a multiple of ``QUERY_STRIDE`` lines: the choice (and with it the model's cached
        context) holds while several lines are typed."""
        head = prefix[: prefix.rfind("\n") + 1]
        cut = len(head)
        for _ in range(head.count("\n") % QUERY_STRIDE):
            cut = head.rfind("\n", 0, cut - 1) + 1
        head = head[:cut] or head  # near the top of a file: every line counts
        start = len(head)
        for _ in range(QUERY_LINES):
            start = head.rfind("\n", 0, max(0, start - 1))
            if start < 0:
                break
        query = head[start + 1 :]
        stamp = (query, self.index.version)
        old = self._chosen.get(key)
        if old is not None and old[0] == stamp:
            return old[1]
        chosen = self.index.query(query, exclude=key, limit=limit, family=family_of(key))
        self._chosen[key] = (stamp, chosen)
        return chosen
