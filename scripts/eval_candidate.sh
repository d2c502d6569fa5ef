#!/bin/bash
# Evaluate a candidate model against the shipped one's figures measured with the same code.
#   scripts/eval_candidate.sh RUN OUT [BASELINE]
# RUN: the candidate's model directory; OUT: where its figures go; BASELINE: a directory holding the
# shipped model's humaneval-single.json, humaneval-multi.json and seed0.json (default: the newest
# measured, results/block_holes). HumanEval single-line runs first; the slower benchmarks run only when
# the candidate beats the shipped model there (the rule for replacing models/default needs both).
set -euo pipefail
cd "$(dirname "$0")/.."  # the repository
RUN=${1:?usage: scripts/eval_candidate.sh RUN OUT [BASELINE]}
OUT=${2:?usage: scripts/eval_candidate.sh RUN OUT [BASELINE]}
BASE=${3:-results/block_holes}
export CELERIS_THREADS=${CELERIS_THREADS:-1}  # beside a training run; more threads stall both
mkdir -p "$OUT"
compare() {  # compare SET CANDIDATE.json SHIPPED.json: print the figures; status 3 when pass@1 is not higher
    .venv/bin/python - "$@" <<'PY'
import json, sys
which, new, shipped = sys.argv[1], *(json.load(open(p)) for p in sys.argv[2:])
for key in ("pass@1", "exact_match", "edit_similarity", "empty_rate"):
    print(f"{which} {key}: candidate {new[key]:.4f}, shipped {shipped[key]:.4f}")
sys.exit(0 if new["pass@1"] > shipped["pass@1"] else 3)
PY
}
.venv/bin/celeris-complete bench quality --set single --model "$RUN" --output "$OUT/single.json"
status=0
compare single-line "$OUT/single.json" "$BASE/humaneval-single.json" || status=$?
if [ "$status" = 3 ]; then echo "not a win on single-line pass@1: stopping here"; exit 0; fi
[ "$status" = 0 ] || exit "$status"  # the comparison itself failed (a missing baseline, say)
.venv/bin/celeris-complete bench quality --set multi --limit 1000 --model "$RUN" --output "$OUT/multi.json"
.venv/bin/celeris-complete bench repo --sites 100 --budget-ms 60000 --model "$RUN" --output "$OUT/repo.json"
.venv/bin/celeris-complete bench compare "$BASE/seed0.json" "$OUT/repo.json" > "$OUT/compare-repo.txt"
compare multi-line "$OUT/multi.json" "$BASE/humaneval-multi.json" || [ $? = 3 ]
cat "$OUT/compare-repo.txt"
