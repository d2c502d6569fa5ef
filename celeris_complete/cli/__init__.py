"""The command line: ``celeris-complete`` and its commands, one module per group (training, serving,
infill, bench, bench_load, bench_studies) on the application in ``app``.  Each command imports what
it needs when it runs, so that starting one command loads only its own code.

May import: everything.
"""

from celeris_complete.cli import bench, bench_load, bench_studies, infill, serving, training  # noqa: F401  (registers)
from celeris_complete.cli.app import app, main

__all__ = ["app", "main"]
