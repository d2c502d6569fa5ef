"""Language-server latency as an editor sees it: real source files typed character by character.

Starts the real server over stdio, opens a real file cut short at a random
line, and types the rest of it at a fixed rate (didChange, then an automatic
inlineCompletion request per keystroke). Reports client-observed latency
percentiles, the share of keystrokes answered before the next one, the
typing-cache hit rate, server readiness time and the server's memory.  The
files' folder is the workspace, so snippets from the other files (indexed in
the background while typing) are part of what is measured.

With ``invoked_every`` N, every Nth keystroke is also followed (once its automatic request is
answered) by an invoked request at the same place, as when the user stops and asks for
completions: the server answers it with ``alternatives`` completions, and its latency and the
number of distinct items it returned are reported apart.

With ``language`` other than Python, the files typed are that language's `bench repo` packages'
(``bench/repo_languages.py``; fetched once into the cache), the largest package's folder the workspace.

With ``think_s``, the typist stops for that long after each line (a user reading or thinking): a
background adaptation (setting ``adapt``) resumes in such pauses, so the keystroke after each one
meets it running; the server's adaptation status at the end says whether it ran and how often it
was paused.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from celeris_complete.bench.selftest import SOURCES, percentile, source_files


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def typing_sessions(
    count: int, seed: int = 0, files: list[Path] | None = None, root: Path = SOURCES
) -> list[tuple[str, str, str]]:
    """(name, text before the typing, text to type) from ``files`` (under ``root``; by default this
    package's own source files); files under 60 lines are not typed."""
    rng = random.Random(seed)
    files = files or source_files()
    if not any(p.read_text(encoding="utf-8").count("\n") >= 59 for p in files):
        raise RuntimeError(f"no file of 60 lines or more to type under {root}")
    sessions = []
    while len(sessions) < count:
        path = rng.choice(files)
        lines = path.read_text(encoding="utf-8").split("\n")
        if len(lines) < 60:
            continue
        start = rng.randrange(5, max(6, len(lines) - 40))
        name = path.relative_to(root).as_posix()
        sessions.append((name, "\n".join(lines[:start]) + "\n", "\n".join(lines[start : start + 30])))
    return sessions


def language_workspace(language: str) -> tuple[Path, list[Path], str]:
    """(workspace folder, files to type, language id) for ``language``: this package's own Python files,
    or the largest of that language's `bench repo` packages."""
    if language == "python":
        return SOURCES, source_files(), "python"
    from celeris_complete.bench.repo_languages import LANGUAGES, fetch_source
    from celeris_complete.bench.repo_languages import source_files as sources_in

    if language not in LANGUAGES:
        raise RuntimeError(f"unknown language {language}: choose from {', '.join(LANGUAGES)}")
    lang = LANGUAGES[language]
    roots = [fetch_source(language, p.name, p.version) for p in lang.packages]
    root = max(roots, key=lambda r: sum(len(t) for t in sources_in(r, lang.suffixes).values()))
    return root, [root / path for path in sources_in(root, lang.suffixes)], lang.language_id


def plain(value):
    """A server reply (pygls hands out nested namedtuples) as plain dicts and lists, for JSON."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


async def start_server(
    init_options: dict, folder: Path, on_timings=None, wait_for_index: bool = False
) -> tuple[LanguageClient, float, object]:
    """The real server over stdio with ``folder`` as its workspace, once its model is loaded (and,
    with ``wait_for_index``, its workspace index built): (client, seconds to ready, its status)."""
    client = LanguageClient("celeris-bench", "0")
    if on_timings is not None:
        client.feature("celeris/timings")(on_timings)
    spawn = time.perf_counter()
    await client.start_io(sys.executable, "-m", "celeris_complete.cli", "lsp")
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            process_id=os.getpid(),
            initialization_options=init_options,
            workspace_folders=[types.WorkspaceFolder(uri=folder.resolve().as_uri(), name=folder.name)],
        )
    )
    client.initialized(types.InitializedParams())
    while True:
        status = await client.protocol.send_request_async("celeris/status", {})
        if status.ready and (not wait_for_index or status.snippet_index.ready):
            break
        await asyncio.sleep(0.05)
    ready_s = time.perf_counter() - spawn
    if status.error:
        await stop_server(client)
        raise RuntimeError(f"the server could not load the model: {status.error}")
    return client, ready_s, status


async def stop_server(client: LanguageClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


async def inline_completion(client: LanguageClient, uri: str, line: int, character: int, invoked: bool = False):
    """A ``textDocument/inlineCompletion`` request at the position: automatic (as you type) or invoked."""
    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    return await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=kind),
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
        )
    )


def texts(result) -> list[str]:
    return [item.insert_text for item in result.items] if result and result.items else []


def invoked_summary(latencies: list[float], items: list[int], wanted: int) -> dict:
    n = len(latencies)
    return {
        "requests": n,
        "alternatives": wanted,
        "latency_ms": {q: round(percentile(latencies, p), 2) for q, p in (("p50", 50), ("p95", 95), ("p99", 99))},
        "items_mean": round(sum(items) / n, 2) if n else None,
        "all_alternatives_distinct": round(sum(k == wanted for k in items) / n, 4) if n else None,
    }


async def _run(
    model: str | None,
    seconds: float,
    keys_per_second: float,
    init_options: dict,
    invoked_every: int = 0,
    think_s: float = 0.0,
    trace: list | None = None,
    language: str = "python",
    min_keystrokes: int = 0,
) -> dict:
    root, files, language_id = language_workspace(language)
    with_snippets = []
    last_timings = []

    def on_timings(params) -> None:
        if getattr(params, "source", None) == "model":
            with_snippets.append(bool(getattr(params, "snippets", None)))
        if trace is not None:
            last_timings.append(params)

    options = dict(init_options)
    if model:
        options["model"] = model
    client, ready_s, status = await start_server(options, root, on_timings)
    pid = client._server.pid
    rss_start = rss_warm = rss_mb(pid)
    interval = 1.0 / keys_per_second
    latencies, answered_in_time, shown = [], 0, 0
    invoked_ms, invoked_items = [], []
    sessions = iter(typing_sessions(1000, files=files, root=root))
    deadline = time.perf_counter() + seconds
    keystrokes = 0
    def done() -> bool:  # the time is up, and at least min_keystrokes were typed
        return time.perf_counter() >= deadline and keystrokes >= min_keystrokes

    while not done():
        name, before, to_type = next(sessions)
        uri = (root / name).resolve().as_uri()  # its own file on disk is never its snippet
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=before)
            )
        )
        line, col, version = before.count("\n"), 0, 1
        for ch in to_type:
            if done():
                break
            tick = time.perf_counter()
            version += 1
            pos = types.Position(line=line, character=col)
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[
                        types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos), text=ch)
                    ],
                )
            )
            line, col = (line + 1, 0) if ch == "\n" else (line, col + len(ch.encode("utf-16-le")) // 2)
            last_timings.clear()  # (an invoked request's, or a document's open)
            sent = time.perf_counter()
            result = await inline_completion(client, uri, line, col)
            took = time.perf_counter() - sent
            latencies.append(took * 1e3)
            if trace is not None:  # the server notifies its timings before it answers
                trace.append({"ms": took * 1e3, "timings": plain(last_timings[-1]) if last_timings else None})
            answered_in_time += took <= interval
            shown += bool(result and result.items)
            keystrokes += 1
            if invoked_every and keystrokes % invoked_every == 0:
                sent = time.perf_counter()
                items = texts(await inline_completion(client, uri, line, col, invoked=True))
                invoked_ms.append((time.perf_counter() - sent) * 1e3)
                invoked_items.append(len(set(items)))
            if keystrokes == 100:  # caches and allocator pools have warmed up
                rss_warm = rss_mb(pid)
            pause = think_s if ch == "\n" else 0.0
            await asyncio.sleep(max(0.0, interval + pause - (time.perf_counter() - tick)))
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri)))
    status = await client.protocol.send_request_async("celeris/status", {})
    rss_end = rss_mb(pid)
    await stop_server(client)
    typing = status.typing_cache
    lookups = typing.hits + typing.misses
    invoked = None
    if invoked_every:
        invoked = invoked_summary(invoked_ms, invoked_items, status.settings.alternatives)
    return {
        "keystrokes": keystrokes,
        "keys_per_second": keys_per_second,
        "think_s": think_s,
        "latency_ms": {q: round(percentile(latencies, p), 2) for q, p in (("p50", 50), ("p95", 95), ("p99", 99))},
        "answered_before_next_key": round(answered_in_time / max(1, keystrokes), 4),
        "completions_shown": round(shown / max(1, keystrokes), 4),
        "typing_cache_hit_rate": round(typing.hits / lookups, 4) if lookups else None,
        "model_calls": status.model_calls,
        "model_calls_with_snippets": round(sum(with_snippets) / len(with_snippets), 4) if with_snippets else None,
        "context_cache": {
            "hits": status.context_cache.hits,
            "partial": status.context_cache.partial,
            "misses": status.context_cache.misses,
        },
        "server_ready_s": round(ready_s, 2),
        "rss_mb": {
            "after_load": rss_start and round(rss_start, 1),
            "after_100_keys": rss_warm and round(rss_warm, 1),
            "end": rss_end and round(rss_end, 1),
        },
        "rss_growth_after_warmup": round(rss_end / rss_warm - 1, 4) if rss_warm and rss_end else None,
        **({"invoked": invoked} if invoked else {}),
        "adaptation": plain(getattr(status, "adaptation", None)),
    }


def run(
    model: str | None,
    seconds: float = 60,
    keys_per_second: float = 20,
    init_options: dict | None = None,
    invoked_every: int = 0,
    think_s: float = 0.0,
    trace: list | None = None,
    language: str = "python",
    min_keystrokes: int = 0,
) -> dict:
    """``invoked_every``: also an invoked request (alternatives) after every Nth keystroke (0: none);
    ``think_s``: a pause after each typed line; ``trace``: receives each keystroke's latency and the
    server's timings for it; ``language``: what is typed (see the module doc); ``min_keystrokes``: typing
    goes on past ``seconds`` until this many keys were typed (a test's run on a loaded machine)."""
    return asyncio.run(
        _run(model, seconds, keys_per_second, init_options or {}, invoked_every, think_s, trace, language,
             min_keystrokes)
    )  # fmt: skip
