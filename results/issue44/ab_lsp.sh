#!/bin/bash
# bench lsp --seconds 60, alternately from clean worktrees before (e1ec324, /work/exp44/before) and after
# (00b21e5, /work/exp44/after; each with its celeris_lsp link), on an otherwise idle machine
for round in 1 2; do
  for side in before after; do
    cd /work/exp44/$side
    PYTHONPATH=/work/exp44/$side /work/main/.venv/bin/python -m celeris_complete.cli bench lsp --seconds 60 --output /work/exp44/ab_lsp_${side}_$round.json > /work/exp44/ab_lsp_${side}_$round.log 2>&1
  done
done
echo done > /work/exp44/ab_lsp.done
