#!/bin/bash
for round in 1 2 3; do
  for side in before after; do
    cd /work/ab/$side && PYTHONPATH=/work/ab/$side /work/main/.venv/bin/python /work/main/results/issue44/ab_keystrokes.py > /work/ab/keys-$side-$round.log 2>&1
  done
done
echo done > /work/ab/keys.done
