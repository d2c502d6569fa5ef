"""What the product costs while it runs, beside the editor: memory and CPU, not latency.

- ``engine_memory``: resident memory of an engine after loading and over many completions at varied
  places (contexts of varying length make an allocator keep freed memory: it must stay flat).
- ``index_memory``: the workspace's snippet index when a large folder is added and removed again
  (as ``bench soak --changing-workspace`` does), before and after freed memory is given back, and the
  time of a snippet query meanwhile.
- ``server_idle_cpu``: CPU seconds the real language server uses while nobody types, once its index is
  built.
- ``huge_document``: the real language server with a 22 MB document: open, a change and a completion
  request, as the client sees them.
"""

from __future__ import annotations

import asyncio
import os
import sysconfig
import time
from pathlib import Path

from lsprotocol import types

from celeris_complete.bench.lsp import inline_completion, rss_mb, start_server, stop_server
from celeris_complete.bench.selftest import SOURCES, sample_cursors
from celeris_complete.drafts.snippets import SnippetIndex
from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.system.memory import release_freed_memory


def _own_rss_mb() -> float:
    return rss_mb(os.getpid()) or 0.0


def engine_memory(engine: Engine, places: int = 400, every: int = 50) -> dict:
    """Resident memory after loading, then every ``every`` places (three keystrokes at each)."""
    rows = [{"places": 0, "completions": 0, "rss_mb": round(_own_rss_mb(), 1), "seconds": 0.0}]
    started = time.perf_counter()
    for i, (text, at, mode) in enumerate(sample_cursors(places, seed=5), 1):
        for k in range(3):
            engine.complete(InfillRequest(text[: at + k], text[at:], mode=mode))
        if i % every == 0 or i == places:
            seconds = round(time.perf_counter() - started, 1)
            rows.append({"places": i, "completions": 3 * i, "rss_mb": round(_own_rss_mb(), 1), "seconds": seconds})
    growth = rows[-1]["rss_mb"] - rows[1]["rss_mb"]  # after the first places: what a long session adds
    return {"quant": engine.quant, "rows": rows, "growth_mb": round(growth, 1)}


def default_folder() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def index_memory(folder: Path, files: int = 1500, cycles: int = 3) -> dict:
    """``files`` of ``folder``'s Python files added to an index holding this package's own, queried and
    removed, ``cycles`` times: files indexed, seconds, resident memory after each stage."""
    index = SnippetIndex()
    for path in sorted(SOURCES.rglob("*.py")):
        index.set_file(str(path), path.read_text(encoding="utf-8"))
    out = {"start_files": index.file_count, "start_rss_mb": round(_own_rss_mb(), 1), "cycles": []}
    paths = sorted(Path(folder).rglob("*.py"))[:files]
    for _ in range(cycles):
        texts = [(str(p), p.read_text(encoding="utf-8", errors="replace")) for p in paths]
        t0 = time.perf_counter()
        for source, text in texts:
            index.set_file(source, text)
        row = {"files": index.file_count, "index_s": round(time.perf_counter() - t0, 2)}
        row["indexed_rss_mb"] = round(_own_rss_mb(), 1)
        queries = [(s, "\n".join(x.splitlines()[20:44])) for s, x in texts[::25]]
        t0 = time.perf_counter()
        for source, query in queries:
            index.query(query, exclude=source)
        row["query_ms"] = round((time.perf_counter() - t0) / max(1, len(queries)) * 1e3, 2)
        for source, _ in texts:
            index.remove(source)
        del texts
        row["files_after_removal"] = index.file_count
        row["removed_rss_mb"] = round(_own_rss_mb(), 1)
        release_freed_memory()
        row["given_back_rss_mb"] = round(_own_rss_mb(), 1)
        out["cycles"].append(row)
    return out


def _ignore(params) -> None:
    """The server's per-request timings: not what these measure."""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def _idle(folder: Path, seconds: float, options: dict) -> dict:
    client, ready_s, _ = await start_server(options, folder, on_timings=_ignore, wait_for_index=True)
    try:
        pid = client._server.pid
        await asyncio.sleep(2.0)  # the file observer starts after the index
        before = _cpu_seconds(pid)
        await asyncio.sleep(seconds)
        used = _cpu_seconds(pid) - before
    finally:
        await stop_server(client)
    return {"folder": str(folder.resolve()), "ready_s": round(ready_s, 2), "idle_s": seconds, "cpu_s": round(used, 3)}


def server_idle_cpu(folder: Path, seconds: float = 20.0, options: dict | None = None) -> dict:
    """The server's CPU seconds over ``seconds`` with ``folder`` as its workspace, once indexed
    (``options``: its initialization options, the model among them)."""
    return asyncio.run(_idle(folder, seconds, dict(options or {})))


def huge_text(functions: int = 400_000) -> str:
    return "".join(f"def function_{i}(value):\n    return value * {i}\n\n" for i in range(functions))


async def _huge(text: str, folder: Path, rounds: int, options: dict) -> dict:
    client, _, _ = await start_server({"mode": "line", **options}, folder, on_timings=_ignore)
    uri = (folder / "huge.py").resolve().as_uri()  # never written: the document lives in the editor
    out: dict = {"megabytes": round(len(text) / 1e6, 1), "requests_ms": [], "items": [], "changes_ms": []}
    try:
        t0 = time.perf_counter()
        item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        client.text_document_did_open(types.DidOpenTextDocumentParams(item))
        await client.protocol.send_request_async("celeris/status", {})  # the open is handled before it
        out["open_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
        line = text.count("\n") // 2 // 3 * 3 + 1  # a function's body, half way down
        for k in range(rounds):
            t0 = time.perf_counter()
            answer = await inline_completion(client, uri, line + 3 * k, 4, invoked=True)
            out["requests_ms"].append(round((time.perf_counter() - t0) * 1e3, 1))
            out["items"].append(len(answer.items) if answer else 0)
            pos = types.Position(line=line + 3 * k, character=4)
            t0 = time.perf_counter()
            change = types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos), text="x")
            doc = types.VersionedTextDocumentIdentifier(uri=uri, version=2 + k)
            client.text_document_did_change(types.DidChangeTextDocumentParams(doc, [change]))
            await client.protocol.send_request_async("celeris/status", {})
            out["changes_ms"].append(round((time.perf_counter() - t0) * 1e3, 1))
    finally:
        await stop_server(client)
    return out


def huge_document(folder: Path, text: str | None = None, rounds: int = 3, options: dict | None = None) -> dict:
    """Open (with a status round trip after it), then ``rounds`` times an invoked completion in a
    function's body half way down and a one-character change there, in ms as the client sees them."""
    return asyncio.run(_huge(text if text is not None else huge_text(), folder, rounds, dict(options or {})))


def render(result: dict) -> str:
    lines = []
    if "engine" in result:
        e = result["engine"]
        lines.append(f"engine (quant {e['quant']}): resident memory")
        for r in e["rows"]:
            lines.append(f"  {r['places']:4} places, {r['completions']:5} completions: {r['rss_mb']:7.1f} MB")
        lines.append(f"  growth after the first {e['rows'][1]['places']} places: {e['growth_mb']:+.1f} MB")
    if "index" in result:
        x = result["index"]
        lines.append(f"snippet index: start {x['start_files']} files, {x['start_rss_mb']:.1f} MB")
        for i, c in enumerate(x["cycles"], 1):
            lines.append(
                f"  cycle {i}: {c['files']} files in {c['index_s']:.1f} s, {c['indexed_rss_mb']:.1f} MB; query "
                f"{c['query_ms']:.2f} ms; removed {c['removed_rss_mb']:.1f} MB, "
                f"given back {c['given_back_rss_mb']:.1f} MB"
            )
    if "idle" in result:
        d = result["idle"]
        lines.append(
            f"language server idle in {d['folder']}: ready in {d['ready_s']:.1f} s, "
            f"{d['cpu_s']:.2f} s of CPU in {d['idle_s']:g} s"
        )
    if "huge" in result:
        h = result["huge"]
        lines.append(
            f"a {h['megabytes']} MB document: open {h['open_ms']:.0f} ms, completion requests {h['requests_ms']} ms, "
            f"changes {h['changes_ms']} ms"
        )
    return "\n".join(lines)
