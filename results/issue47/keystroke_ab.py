"""selftest's keystroke workload on one fixed set of files, for an A/B of the hot path across a move
of the package's files (selftest samples its places from the package's own files, which the move changed).

    python keystroke_ab.py CHECKOUT FILES_DIR   # FILES_DIR: here e5e7b14's celeris_complete/
"""
import json
import sys
from pathlib import Path

root = sys.argv[1]
sys.path.insert(0, root)
FILES = Path(sys.argv[2])
try:  # the import path is the checkout's: after the move, or before it
    import celeris_complete.bench.selftest as st
    st.source_files = lambda: sorted(FILES.glob("*.py"))
except ImportError:
    import celeris_complete.selftest as st
    st.SOURCES = FILES
from celeris_complete.config import load_settings  # noqa: E402
from celeris_complete.engine import Engine  # noqa: E402

engine = Engine(load_settings({}))
r = st.run_selftest(engine, 100.0, requests=48, long_requests=0)
figures = {"keystroke": r["keystroke_ms"], "miss": r["cache_miss_ms"], "phases": r["phases_ms_p50"]}
print(json.dumps({"root": root, **figures}))
