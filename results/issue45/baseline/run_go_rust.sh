#!/bin/bash
# bench repo --language L, seeds 0-3, today's main (only the harness added): the baseline of issue 45
cd /work/exp45/wt
export PYTHONPATH=/work/exp45/wt
for L in go rust; do
  for s in 0 1 2 3; do
    /work/main/.venv/bin/python -m celeris_complete.cli bench repo --language $L --sites 100 --budget-ms 60000 --seed $s --set threads=1 --output /work/exp45/$L-s$s.json > /work/exp45/$L-s$s.log 2>&1
  done
done
echo done > /work/exp45/baseline_go_rust.done
