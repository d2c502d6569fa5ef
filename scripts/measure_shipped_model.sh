#!/usr/bin/env bash
# Every figure the README and the model card quote about the shipped model, in one run
# (about 12 minutes on 2 cores). Usage: scripts/measure_shipped_model.sh OUTDIR
# The decoding defaults themselves come from `bench tune` (about 15 minutes; results/tune.json),
# run separately: .venv/bin/celeris-complete bench tune --output results/tune.json
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/measure_shipped_model.sh OUTDIR (outside results/: its per-task files are large)}
mkdir -p "$out"
cc=.venv/bin/celeris-complete
$cc eval > "$out/validation.json"
$cc bench quality --set single --output "$out/humaneval-single.json" > "$out/humaneval-single.summary.json"
$cc bench quality --set multi --limit 500 --output "$out/humaneval-multi-500.json" > "$out/humaneval-multi-500.summary.json"
$cc bench quality --set single --quant none --output "$out/humaneval-single-fp32.json" > "$out/humaneval-single-fp32.summary.json"
$cc bench quality --set multi --limit 500 --quant none --output "$out/humaneval-multi-500-fp32.json" > "$out/humaneval-multi-500-fp32.summary.json"
$cc bench engine --output "$out/engine.json" > "$out/engine.md"
$cc bench latency --seconds 60 --output-dir "$out" > /dev/null   # latency.json/.md, dial.png
$cc selftest --json > "$out/selftest.json" || true
echo "results in $out/"
