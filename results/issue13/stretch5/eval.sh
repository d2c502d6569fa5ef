#!/bin/bash
# Evaluate the fifth stretch (RUN: its output directory) as the fourth was, plus bench repo with drafts off (the model itself).
set -x
cd "$(dirname "$0")/../../.."  # the repository
RUN=~/.cache/celeris-complete/runs/pkg5
OUT=results/issue13/stretch5
.venv/bin/celeris-complete bench quality --set single --model $RUN --output $OUT/single.json
.venv/bin/celeris-complete bench quality --set multi --limit 1000 --model $RUN --output $OUT/multi.json
.venv/bin/celeris-complete bench repo --sites 100 --budget-ms 60000 --model $RUN --output $OUT/repo.json
.venv/bin/celeris-complete bench repo --sites 100 --budget-ms 60000 --set drafts=false --model $RUN --output $OUT/repo-nodrafts.json
.venv/bin/python scripts/compare_repo_runs.py $OUT/shipped-repo-nodrafts.json $OUT/repo-nodrafts.json > $OUT/compare-nodrafts.txt
.venv/bin/python scripts/compare_repo_runs.py results/drafts_repo/seed0-after.json $OUT/repo.json > $OUT/compare-drafts.txt
echo done
