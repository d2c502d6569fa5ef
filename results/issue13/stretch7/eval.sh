#!/bin/bash
# Evaluate the seventh stretch: the shared candidate evaluation (HumanEval single-line against the shipped
# model measured with the same code, results/names_check; the rest only if it wins), run from the repository.
cd "$(dirname "$0")/../../.." && exec scripts/eval_candidate.sh ~/.cache/celeris-complete/runs/pkg7 results/issue13/stretch7
