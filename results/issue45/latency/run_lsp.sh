#!/bin/bash
# bench lsp, Python, before (b2d796d, this session's start) and after (d52d063), alternately; then per language after.
for round in 1 2; do
  for side in before after; do
    cd /work/ab/$side && PYTHONPATH=/work/ab/$side /work/main/.venv/bin/python -m celeris_complete.cli bench lsp --seconds 60 --output /work/ab/python-$side-$round.json > /work/ab/python-$side-$round.log 2>&1
  done
done
for L in go typescript rust javascript; do
  cd /work/ab/after && PYTHONPATH=/work/ab/after /work/main/.venv/bin/python -m celeris_complete.cli bench lsp --language $L --seconds 60 --output /work/ab/$L-after.json > /work/ab/$L-after.log 2>&1
done
echo done > /work/ab/done
