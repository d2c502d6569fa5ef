#!/bin/bash
# Evaluate the sixth stretch (RUN: its output directory): HumanEval single-line first, the benchmark on
# which every continuation so far lost; the rest only if it does not.
set -x
cd "$(dirname "$0")/../../.."  # the repository
RUN=~/.cache/celeris-complete/runs/pkg6
OUT=results/issue13/stretch6
.venv/bin/celeris-complete bench quality --set single --model $RUN --output $OUT/single.json
python3 - "$OUT/single.json" results/drafts_rank/humaneval-single.json <<'PY' || exit 0
import json, sys
new, shipped = (json.load(open(p))["pass@1"] for p in sys.argv[1:])
print(f"single-line pass@1: sixth stretch {new:.2%}, shipped {shipped:.2%}")
sys.exit(0 if new > shipped else 1)
PY
.venv/bin/celeris-complete bench quality --set multi --limit 1000 --model $RUN --output $OUT/multi.json
.venv/bin/celeris-complete bench repo --sites 100 --budget-ms 60000 --set drafts=false --model $RUN --output $OUT/repo-nodrafts.json
.venv/bin/python scripts/compare_repo_runs.py results/issue13/stretch5/shipped-repo-nodrafts.json $OUT/repo-nodrafts.json > $OUT/compare-nodrafts.txt
echo done
