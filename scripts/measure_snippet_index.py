"""Memory and time to index a big workspace for snippets (default: this Python's standard library).

Usage: .venv/bin/python scripts/measure_snippet_index.py [FOLDER]
"""

import os
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from celeris_complete.drafts.snippets import SnippetIndex  # noqa: E402
from celeris_lsp.workspace_index import WorkspaceIndexer  # noqa: E402


def rss_mb() -> float:
    for line in open(f"/proc/{os.getpid()}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


folder = Path(sys.argv[1] if len(sys.argv) > 1 else sysconfig.get_paths()["stdlib"])
index = SnippetIndex()
before, t = rss_mb(), time.time()
indexer = WorkspaceIndexer(folder, index, (".env",))
indexer.scan()
print(f"{indexer.files} files, {len(index)} chunks, +{rss_mb() - before:.0f} MB, {time.time() - t:.1f} s")
t = time.time()
for _ in range(20):
    index.query("def parse_args(self, args=None):\n    parser = argparse.ArgumentParser()\n")
print(f"query: {(time.time() - t) / 20 * 1e3:.2f} ms")
