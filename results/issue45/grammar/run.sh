#!/bin/bash
# bench repo --language L, seeds 0-3, with the parsers' check (d52d063)
cd /work/ab/after
export PYTHONPATH=/work/ab/after
for L in $@; do
  for s in 0 1 2 3; do
    /work/main/.venv/bin/python -m celeris_complete.cli bench repo --language $L --sites 100 --budget-ms 60000 --seed $s --set threads=1 --output /work/exp45/grammar2/$L-s$s.json > /work/exp45/grammar2/$L-s$s.log 2>&1
  done
done
echo done > /work/exp45/grammar2/$1.done
