"""Inline completions with and without celeris/nextEdit requests beside them (the real server, the
shipped model): keys at a steady pace (PACE_S); after each the client asks for the inline completion,
and with next edits on also for the next edit at once (the editors ask after a pause: this is harsher).
Prints p50/p95 of the inline answers, both ways, twice.
Usage: .venv/bin/python results/issue46/inline_with_next_edits.py [FILE] [KEYS]"""

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.lsp_session import Session  # noqa: E402

FILE = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("celeris_complete/edits/propagate.py")
KEYS = int(sys.argv[2]) if len(sys.argv) > 2 else 240
WARM = 40  # the first keys' answers are not counted (the model warms up, traces in the background)
PACE_S = 0.15  # a key every 150 ms, whatever the answers take


async def one_pass(with_edits: bool) -> tuple[list[float], list[float]]:
    session = Session(Path("models/default"), init_options={"min_confidence": 0})
    await session.start()
    uri = f"file:///bench/{FILE.name}"
    text = FILE.read_text()
    session.open(uri, text)
    lines = text.splitlines()
    inline_ms, edit_ms = [], []
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("return"))
    col = len(lines[row])
    typed = " + value_total" * 20
    pending = []
    start = time.perf_counter()
    for k in range(KEYS):
        await asyncio.sleep(max(0.0, start + k * PACE_S - time.perf_counter()))  # keys at a steady pace
        session.insert(uri, row, col + k, typed[k % len(typed)])

        at = col + k + 1

        async def inline(at: int = at) -> None:
            t0 = time.perf_counter()
            await session.inline(uri, row, at)
            inline_ms.append((time.perf_counter() - t0) * 1e3)

        async def edit(at: int = at) -> None:
            t0 = time.perf_counter()
            await session.next_edit(uri, row, at)
            edit_ms.append((time.perf_counter() - t0) * 1e3)

        pending.append(asyncio.ensure_future(asyncio.gather(inline(), *([edit()] if with_edits else []))))
    await asyncio.gather(*pending)
    await session.stop()
    return inline_ms[WARM:], edit_ms[WARM:]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def main() -> None:
    for with_edits in (False, True, False, True):
        inline_ms, edit_ms = await one_pass(with_edits)
        print(f"next edits {'on ' if with_edits else 'off'}: inline p50 {statistics.median(inline_ms):.1f} ms, "
              f"p95 {pct(inline_ms, 0.95):.1f} ms" + (f"; nextEdit p50 {statistics.median(edit_ms):.1f} ms, "
              f"p95 {pct(edit_ms, 0.95):.1f} ms" if edit_ms else ""), flush=True)


asyncio.run(main())
