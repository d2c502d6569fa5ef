"""What `import_drafts` costs: on every import line of some Python files, the cursor after the line's
first word (as when one is typed), the time of the first call there (the document's symbol table
built) and of a second (the cache), p50 / p90 / max in ms. The workspace's import lines come from a
line table of every file of the standard library's top directory (up to MAX_SCAN lines looked at per
call, as in the server).

    .venv/bin/python scripts/measure_import_drafts.py [FILE_OR_DIR ...]   # default: 200 stdlib files
"""

from __future__ import annotations

import statistics
import sys
import sysconfig
import time
from pathlib import Path

from celeris_complete.drafts.imports import STARTS_IMPORT, import_drafts, workspace_imports
from celeris_complete.drafts.table import LineTable


def files(args: list[str]) -> list[Path]:
    roots = [Path(a) for a in args] or [Path(sysconfig.get_paths()["stdlib"])]
    found = sorted(p for r in roots for p in ([r] if r.is_file() else r.glob("*.py")))
    return found[:: max(1, len(found) // 200)] if not args else found


def stdlib_table() -> LineTable:
    table = LineTable()
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            table.set_file(str(path), path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return table


def main() -> None:
    table = stdlib_table()
    first, again, fired = [], [], 0
    for path in files(sys.argv[1:]):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        offset = 0
        for line in text.splitlines(keepends=True):
            if STARTS_IMPORT.match(line):
                word = line.split()[0] + " "
                prefix, suffix = text[: offset + len(word)], "\n" + text[offset + len(line) :]
                for times in (first, again):
                    t0 = time.perf_counter()
                    drafts = import_drafts(prefix, suffix, lambda source=str(path): workspace_imports(table, source))
                    times.append((time.perf_counter() - t0) * 1000)
                fired += bool(drafts)
            offset += len(line)
    for name, times in (("first call", first), ("again (cached)", again)):
        q = statistics.quantiles(times, n=10)
        print(f"{name}: {len(times)} import lines, p50 {q[4]:.2f} ms, p90 {q[8]:.2f} ms, max {max(times):.1f} ms")
    print(f"drafts offered at {fired} of {len(first)}")


if __name__ == "__main__":
    main()
