"""Language-server timings in a 22 MB document: open, a change, a completion request (client-observed).

Usage: .venv/bin/python scripts/measure_huge_document.py
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.lsp_session import Session, run  # noqa: E402

TEXT = "".join(f"def function_{i}(value):\n    return value * {i}\n\n" for i in range(400_000))


async def main() -> None:
    print(f"{len(TEXT) / 1e6:.1f} MB")
    s = Session(Path(__file__).resolve().parent.parent / "models" / "default", init_options={"mode": "line"})
    await s.start()
    uri = "file:///huge.py"
    t = time.perf_counter()
    s.open(uri, TEXT)
    await s.status()
    print(f"open (+ a status round trip): {(time.perf_counter() - t) * 1e3:.0f} ms")
    for k in range(3):
        t = time.perf_counter()
        await s.inline(uri, 600_000 + k, 4, invoked=True)
        print(f"completion request: {(time.perf_counter() - t) * 1e3:.0f} ms")
        t = time.perf_counter()
        s.insert(uri, 600_000 + k, 4, "x")
        await s.status()
        print(f"change (+ a status round trip): {(time.perf_counter() - t) * 1e3:.0f} ms")
    await s.stop()


run(main())
