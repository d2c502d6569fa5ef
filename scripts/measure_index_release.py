"""Memory of the workspace index when a large folder is added and removed three times, as in
``bench soak --changing-workspace`` (default: 1,500 files of this Python's standard library, beside
this package's own files), and the time of a snippet query.

Usage: .venv/bin/python scripts/measure_index_release.py [FOLDER]
"""

import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from celeris_complete.drafts.snippets import SnippetIndex  # noqa: E402
from celeris_complete.system.memory import release_freed_memory  # noqa: E402


def rss_mb() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 1e6


folder = Path(sys.argv[1] if len(sys.argv) > 1 else sysconfig.get_paths()["stdlib"])
index = SnippetIndex()
for path in sorted((Path(__file__).resolve().parent.parent / "celeris_complete").glob("*.py")):
    index.set_file(str(path), path.read_text())
print(f"start: {index.file_count} files, RSS {rss_mb():.1f} MB")
for cycle in range(3):
    texts = [(str(p), p.read_text(errors="replace")) for p in sorted(folder.rglob("*.py"))[:1500]]
    t = time.perf_counter()
    for source, text in texts:
        index.set_file(source, text)
    took = time.perf_counter() - t
    print(f"cycle {cycle + 1}: {index.file_count} files indexed in {took:.1f} s, RSS {rss_mb():.1f} MB")
    queries = [(s, "\n".join(x.splitlines()[20:44])) for s, x in texts[::25]]
    t = time.perf_counter()
    for source, query in queries:
        index.query(query, exclude=source)
    print(f"  query {(time.perf_counter() - t) / len(queries) * 1e3:.2f} ms on average ({len(queries)} queries)")
    for source, _ in texts:
        index.remove(source)
    del texts
    removed = rss_mb()
    release_freed_memory()
    print(f"  removed: RSS {removed:.1f} MB, after giving freed memory back {rss_mb():.1f} MB")
