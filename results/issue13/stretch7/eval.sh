#!/bin/bash
# Evaluate the seventh stretch (RUN: its output directory): HumanEval single-line first, against the
# shipped model with the same code (results/names_check/humaneval-single.json); the rest only if it wins.
set -x
cd "$(dirname "$0")/../../.."  # the repository
RUN=~/.cache/celeris-complete/runs/pkg7
OUT=results/issue13/stretch7
export CELERIS_THREADS=1
.venv/bin/celeris-complete bench quality --set single --model $RUN --output $OUT/single.json
python3 - "$OUT/single.json" results/names_check/humaneval-single.json <<'PY' || exit 0
import json, sys
new, shipped = (json.load(open(p))["pass@1"] for p in sys.argv[1:])
print(f"single-line pass@1: seventh stretch {new:.2%}, shipped {shipped:.2%}")
sys.exit(0 if new > shipped else 1)
PY
.venv/bin/celeris-complete bench quality --set multi --limit 1000 --model $RUN --output $OUT/multi.json
.venv/bin/celeris-complete bench repo --sites 100 --budget-ms 60000 --model $RUN --output $OUT/repo.json
.venv/bin/python scripts/compare_repo_runs.py results/names_check/seed0.json $OUT/repo.json > $OUT/compare-repo.txt
echo done
