"""A long typing session through the real language server: memory, threads, file descriptors and latency
minute by minute.

``bench lsp``'s typing (real source files cut short and typed on character by character, an automatic
``inlineCompletion`` request per keystroke), kept up for 10 minutes by default over several files: a few
stay open at once, the oldest is closed when another is opened.  The workspace is a copy of this
package's sources, indexed for snippets.  Every 10 s the server's resident memory, threads and open file
descriptors are read from ``/proc``; the client-observed latency is summed up per minute.

With ``changing``, the workspace changes under it while the watcher is on: every few seconds a file is
created, edited or deleted, and a large folder (up to 1,500 files of the Python standard library) is
added and removed twice, at 20/40% and 60/80% of the run.  After each of those four the changes wait
until the server's index shows it (all but two of the folder's files in the index, or out of it; up to
``BIG_FOLDER_WAIT_S``), and the seconds that took are part of the result (None: not in that time);
typing goes on meanwhile, and a run whose typing ends first waits for the rest of them.

The targets (issue 16): memory growth under 10% from minute 1 to the end, no growth in threads or file
descriptors, p99 of the last minute within 20% of the first.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import shutil
import sysconfig
import tempfile
import time
from pathlib import Path

from lsprotocol import types

from celeris_complete.bench.lsp import inline_completion, rss_mb, start_server, stop_server, typing_sessions
from celeris_complete.bench.selftest import SOURCES, percentile, source_files

BIG_FOLDER_FILES = 1500
BIG_FOLDER_WAIT_S = 120.0  # for the server's index to show the large folder added or removed
SLACK = 2  # files the index may lack of it (or still hold) when it counts as shown: see big_folder_change


def threads_and_fds(pid: int) -> tuple[int | None, int | None]:
    try:
        return len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None, None


def insert(client, uri: str, version: int, line: int, col: int, text: str) -> None:
    """A ``didChange`` inserting ``text`` at the position."""
    pos = types.Position(line=line, character=col)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos), text=text)],
        )
    )


class WorkspaceChanges:
    """Creates, edits and deletes files in ``root`` and adds and removes a large folder, on a schedule."""

    def __init__(self, root: Path, seconds: float, big_files: int = BIG_FOLDER_FILES, seed: int = 0) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.created: list[Path] = []
        self.counts = {"created": 0, "edited": 0, "deleted": 0, "big_folder_added": 0, "big_folder_removed": 0}
        self.big_seen_s: dict[str, list[float | None]] = {"big_folder_indexed_s": [], "big_folder_dropped_s": []}
        self.big = root / "big_folder"
        self.big_at = [(seconds * f, add) for f, add in ((0.2, True), (0.4, False), (0.6, True), (0.8, False))]
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        skip = {"test", "tests", "site-packages", "idlelib", "lib2to3"}
        self.big_sources = sorted(p for p in stdlib.rglob("*.py") if not skip & set(p.relative_to(stdlib).parts))
        self.big_sources = self.big_sources[:big_files]
        self.stdlib = stdlib

    def big_due(self, elapsed: float) -> bool:
        """Whether the large folder's next change has come."""
        return bool(self.big_at) and elapsed >= self.big_at[0][0]

    def big_step(self) -> bool:
        """The large folder's next change (whether it was added)."""
        _, add = self.big_at.pop(0)
        if add:
            for src in self.big_sources:
                dst = self.big / src.relative_to(self.stdlib)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
            self.counts["big_folder_added"] += 1
        else:
            shutil.rmtree(self.big, ignore_errors=True)
            self.counts["big_folder_removed"] += 1
        return add

    def step(self, elapsed: float) -> None:
        """One change of a file (and the large folder's, when its time has come)."""
        while self.big_due(elapsed):
            self.big_step()
        self.small_step()

    def small_step(self) -> None:
        """One file created, edited or deleted."""
        action = self.rng.choice(["create", "edit", "delete"] if self.created else ["create"])
        if action == "create":
            src = self.rng.choice(source_files())
            path = self.root / f"new_{self.counts['created']}.py"
            path.write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
            self.created.append(path)
            self.counts["created"] += 1
        elif action == "edit":
            path = self.rng.choice(self.created)
            with path.open("a", encoding="utf-8") as out:
                out.write(
                    f"\n\ndef added_{self.counts['edited']}(value):\n    return value * {self.counts['edited']}\n"
                )
            self.counts["edited"] += 1
        else:
            self.created.pop(self.rng.randrange(len(self.created))).unlink()
            self.counts["deleted"] += 1


def summarise(
    latencies: list[tuple[float, float]], window_s: float, interval: float, seconds: float | None = None
) -> list[dict]:
    """Per window (a minute by default): keystrokes, latency percentiles, share answered before the next key.
    With ``seconds`` (the run's length), a keystroke sent as the run ended counts in the last window
    instead of opening one of its own."""
    last = int(max((t for t, _ in latencies), default=0) // window_s)
    if seconds is not None:
        last = min(last, max(0, math.ceil(seconds / window_s) - 1))
    rows = []
    for w in range(last + 1):
        ms = [x for t, x in latencies if min(int(t // window_s), last) == w]
        if not ms:
            continue
        row = {"minute": w + 1, "keystrokes": len(ms)}
        row.update({q: round(percentile(ms, p), 2) for q, p in (("p50", 50), ("p95", 95), ("p99", 99))})
        row["answered_before_next_key"] = round(sum(x <= interval * 1e3 for x in ms) / len(ms), 4)
        rows.append(row)
    return rows


def verdict(samples: list[dict], minutes: list[dict], window_s: float) -> dict:
    """The issue's targets, from minute 1 (the first sample at or after ``window_s``) to the end."""
    first = next((s for s in samples if s["t"] >= window_s), samples[-1])
    last = samples[-1]
    later = [s for s in samples if s["t"] >= first["t"]]
    growth = round(last["rss_mb"] / first["rss_mb"] - 1, 4) if first["rss_mb"] and last["rss_mb"] else None
    p99 = round(minutes[-1]["p99"] / minutes[0]["p99"] - 1, 4) if len(minutes) > 1 else None
    return {
        "rss_growth_minute1_to_end": growth,
        "threads_minute1_then_max": [first["threads"], max(s["threads"] for s in later)],
        "fds_minute1_then_max": [first["fds"], max(s["fds"] for s in later)],
        "p99_last_vs_first_minute": p99,
        "memory_ok": growth is not None and growth < 0.10,
        "threads_ok": last["threads"] <= first["threads"],
        "fds_ok": last["fds"] <= first["fds"],
        "p99_ok": p99 is not None and p99 <= 0.20,
    }


async def _run(
    model: str | None,
    seconds: float,
    keys_per_second: float,
    changing: bool,
    window_s: float,
    sample_s: float,
    open_at_once: int,
    change_every_s: float,
    big_files: int,
    init_options: dict,
) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="celeris-soak-"))
    try:
        root = tmp / "workspace"
        shutil.copytree(SOURCES, root, ignore=shutil.ignore_patterns("__pycache__"))
        options = {**init_options, **({"model": model} if model else {})}
        client, ready_s, status = await start_server(options, root, lambda params: None, wait_for_index=True)
        pid = client._server.pid
        changes = WorkspaceChanges(root, seconds, big_files) if changing else None
        interval = 1.0 / keys_per_second
        latencies: list[tuple[float, float]] = []  # (seconds into the run, ms)
        samples: list[dict] = []
        start = time.perf_counter()

        async def index_files() -> int:
            return (await client.protocol.send_request_async("celeris/status", {})).snippet_index.files

        async def sample() -> None:
            threads, fds = threads_and_fds(pid)
            files = await index_files()
            t = round(time.perf_counter() - start, 1)
            samples.append({"t": t, "rss_mb": rss_mb(pid), "threads": threads, "fds": fds, "indexed_files": files})

        async def sampling() -> None:
            next_sample = 0.0
            while True:
                if time.perf_counter() - start >= next_sample:
                    await sample()
                    next_sample += sample_s
                await asyncio.sleep(0.2)

        async def big_folder_change() -> None:
            """The large folder's next change, then the wait until the index shows it (all but two files: the
            event of a small change made just before may still be on its way, and a document closed just
            then is out of the index until the watcher reads it again from disk)."""
            assert changes is not None
            before = await index_files()
            t0 = time.perf_counter()
            added = await asyncio.to_thread(changes.big_step)
            n = len(changes.big_sources)
            seen: float | None = None
            while time.perf_counter() - t0 < BIG_FOLDER_WAIT_S:
                files = await index_files()
                if (files >= before + n - SLACK) if added else (files <= before - n + SLACK):
                    seen = round(time.perf_counter() - t0, 2)
                    break
                await asyncio.sleep(0.1)
            changes.big_seen_s["big_folder_indexed_s" if added else "big_folder_dropped_s"].append(seen)

        big_folder_done = asyncio.Event()

        async def changing_workspace() -> None:
            assert changes is not None
            next_change = change_every_s
            while True:
                elapsed = time.perf_counter() - start
                if elapsed >= next_change:
                    if changes.big_due(elapsed):
                        await big_folder_change()
                        next_change = time.perf_counter() - start + change_every_s  # (no burst after the wait)
                    else:
                        await asyncio.to_thread(changes.small_step)
                        next_change += change_every_s
                if not changes.big_at:
                    big_folder_done.set()
                await asyncio.sleep(0.2)

        tasks = [asyncio.create_task(sampling())]
        if changes is not None:
            tasks.append(asyncio.create_task(changing_workspace()))
        sessions = iter(typing_sessions(10_000, seed=1))
        opened: list[str] = []
        deadline = start + seconds
        keystrokes = 0
        while time.perf_counter() < deadline:
            name, before, to_type = next(sessions)
            uri = (root / name).as_uri()
            if uri in opened:
                continue
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, before))
            )
            opened.append(uri)
            if len(opened) > open_at_once:
                closing = opened.pop(0)
                client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(closing)))
            line, col, version = before.count("\n"), 0, 1
            for ch in to_type[:400]:  # then on to another file
                if time.perf_counter() >= deadline:
                    break
                tick = time.perf_counter()
                version += 1
                insert(client, uri, version, line, col, ch)
                line, col = (line + 1, 0) if ch == "\n" else (line, col + len(ch.encode("utf-16-le")) // 2)
                sent = time.perf_counter()
                await inline_completion(client, uri, line, col)
                latencies.append((sent - start, (time.perf_counter() - sent) * 1e3))
                keystrokes += 1
                await asyncio.sleep(max(0.0, interval - (time.perf_counter() - tick)))
            # the document stays open (up to open_at_once of them), as in an editor's tabs
        if changes is not None:  # the large folder's changes still due, each waited for
            done = asyncio.create_task(big_folder_done.wait())
            await asyncio.wait([done, tasks[1]], return_when=asyncio.FIRST_COMPLETED)
            done.cancel()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task  # (a task that failed raises here)
        await sample()
        status = await client.protocol.send_request_async("celeris/status", {})
        await stop_server(client)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    minutes = summarise(latencies, window_s, interval, seconds)
    return {
        "seconds": seconds,
        "keys_per_second": keys_per_second,
        "keystrokes": keystrokes,
        "window_s": window_s,
        "workspace_changing": changing,
        "workspace_changes": {**changes.counts, **changes.big_seen_s} if changes else None,
        "server_ready_s": round(ready_s, 2),
        "model_calls": status.model_calls,
        "per_minute": minutes,
        "samples": samples,
        "targets": verdict(samples, minutes, window_s),
    }


def run(
    model: str | None,
    seconds: float = 600,
    keys_per_second: float = 20,
    changing: bool = False,
    window_s: float = 60,
    sample_s: float = 10,
    open_at_once: int = 3,
    change_every_s: float = 3,
    big_files: int = BIG_FOLDER_FILES,
    init_options: dict | None = None,
) -> dict:
    return asyncio.run(
        _run(
            model,
            seconds,
            keys_per_second,
            changing,
            window_s,
            sample_s,
            open_at_once,
            change_every_s,
            big_files,
            init_options or {},
        )
    )


def table(result: dict) -> str:
    """The per-minute rows and the targets, in Markdown."""
    samples = result["samples"]
    lines = [
        "| minute | keystrokes | p50 ms | p95 ms | p99 ms | before next key | RSS MB | threads | fds | indexed files |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["per_minute"]:
        at = min(samples, key=lambda s: abs(s["t"] - row["minute"] * result["window_s"]))
        lines.append(
            f"| {row['minute']} | {row['keystrokes']} | {row['p50']} | {row['p95']} | {row['p99']} | "
            f"{row['answered_before_next_key']:.1%} | {at['rss_mb']:.1f} | {at['threads']} | {at['fds']} | "
            f"{at['indexed_files']} |"
        )
    t = result["targets"]
    met = {True: "met", False: "missed"}
    p99 = t["p99_last_vs_first_minute"]
    lines += [
        "",
        f"RSS growth from minute 1 to the end {t['rss_growth_minute1_to_end']:+.1%} (target < 10%: "
        f"{met[t['memory_ok']]}); threads {t['threads_minute1_then_max']} and file descriptors "
        f"{t['fds_minute1_then_max']} at minute 1 and at most after "
        f"(no growth: {met[t['threads_ok'] and t['fds_ok']]}); "
        f"p99 of the last minute against the first {'n/a' if p99 is None else f'{p99:+.1%}'} (target within 20%: "
        f"{met[t['p99_ok']]})",
    ]
    return "\n".join(lines)
