"""The compiler check's own time per verdict, on selftest's places and keystrokes (shipped model).

    .venv/bin/python scripts/measure_syntax_check.py [--requests 24]

Each place is completed fresh and then typed 4 characters further, as `celeris-complete selftest`
does, twice: as the language server's keystroke requests (no samples drawn) and as `infill` or an
invoked request (samples allowed). Prints the median and largest `timings_ms["syntax"]` per verdict.
"""

from __future__ import annotations

import argparse
import collections
import statistics

from celeris_complete.bench.selftest import sample_cursors
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine, InfillRequest


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=24)
    a = ap.parse_args()
    engine = Engine(load_settings({}))
    for samples in (False, True):
        spent = collections.defaultdict(list)
        for text, at, mode in sample_cursors(a.requests):
            line_end = text.find("\n", at)
            line_end = len(text) if line_end < 0 else line_end
            engine.cache.clear()
            for k in range(5):
                done = engine.complete(InfillRequest(
                    text[: min(line_end, at + k)], text[line_end:], mode=mode, language="python",
                    repair_samples=samples,
                ))  # fmt: skip
                spent[done.syntax].append(done.timings_ms["syntax"])
        print(f"samples {'allowed' if samples else 'off (keystrokes)'}:")
        for verdict, ms in sorted(spent.items()):
            print(f"  {verdict:10} n={len(ms):3}  median {statistics.median(ms):6.2f} ms  max {max(ms):6.2f} ms")


if __name__ == "__main__":
    main()
