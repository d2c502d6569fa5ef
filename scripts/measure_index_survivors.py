"""What a large folder added to the workspace index and removed again leaves behind: live Python
memory against the process's anonymous resident memory. Run it as is and with PYTHONMALLOC=malloc to
compare the allocators; with --trace it counts the live Python objects instead (tracemalloc's own
memory then inflates the resident figures) (2026-12-02).

Usage: .venv/bin/python scripts/measure_index_survivors.py [--trace] [FOLDER]
"""

import sys
import sysconfig
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from celeris_complete.drafts.snippets import SnippetIndex  # noqa: E402
from celeris_complete.system.memory import release_freed_memory  # noqa: E402


def anon_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


index = SnippetIndex()
for path in sorted((ROOT / "celeris_complete").glob("*.py")):
    index.set_file(str(path), path.read_text())
trace = "--trace" in sys.argv
args = [a for a in sys.argv[1:] if a != "--trace"]
folder = Path(args[0] if args else sysconfig.get_paths()["stdlib"])
paths = sorted(folder.rglob("*.py"))[:1500]
release_freed_memory()
if trace:
    tracemalloc.start()
start = anon_mb()
for cycle in range(2):
    texts = [(str(p), p.read_text(errors="replace")) for p in paths]
    for source, text in texts:
        index.set_file(source, text)
    full = anon_mb()
    for source, _ in texts:
        index.remove(source)
    del texts
    release_freed_memory()
    line = (
        f"cycle {cycle + 1}: anonymous RSS {start:.1f} MB at the start, {full:.1f} full, {anon_mb():.1f} after removal"
    )
    if trace:
        live = tracemalloc.get_traced_memory()[0] / 2**20
        line += f"; Python objects allocated since the start and still live: {live:.1f} MB"
    print(line)
