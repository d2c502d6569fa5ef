"""``python -m celeris_complete.cli``: the same commands as ``celeris-complete``."""

from celeris_complete.cli import main

main()
