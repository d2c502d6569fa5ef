#!/usr/bin/env bash
# Model size at equal compute: three sizes trained on the same tokens (the `train --packages` corpus,
# the shipped tokenizer, batch 16 x 384, STEPS steps each), then compared on held-out validation,
# HumanEval-Infilling single-line and keystroke latency. Resumable: each call goes on for at most
# STRETCH_MINUTES of training (default 50) with whichever run is unfinished, at low priority, and
# measures the finished ones; run it again until it prints the table.
#   scripts/scaling_study.sh [RUNS_DIR]     (default ~/.cache/celeris-complete/scaling)
# Needs the tokenized corpus of a `train --packages --init-from models/default` run in PREPARED
# (default ~/.cache/celeris-complete/runs/pkg-continue/.work): its data are copied, not re-made.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-$HOME/.cache/celeris-complete/scaling}
prepared=${PREPARED:-$HOME/.cache/celeris-complete/runs/pkg-continue/.work}
steps=${STEPS:-1500}
budget=${STRETCH_MINUTES:-50}
cc=.venv/bin/celeris-complete
sizes="s:192:4:4 m:256:6:4 l:320:8:5"
mkdir -p "$runs"
for size in $sizes; do
  IFS=: read -r name d layers heads <<<"$size"
  out="$runs/$name"
  [ -f "$out/model.safetensors" ] && continue
  if [ ! -d "$out/.work" ]; then
    mkdir -p "$out/.work"
    cp "$prepared"/{tokenizer.json,corpus_manifest.json,train.bin,val.bin} "$out/.work/"
  fi
  started=$(date +%s)
  nice -n 10 $cc train -o "$out" --steps "$steps" --d-model "$d" --n-layers "$layers" --n-heads "$heads" \
    --batch-size 16 --context-len 384 --stretch-minutes "$budget" 2>&1 | tee -a "$runs/$name.log" | grep -v "^step"
  budget=$(( budget - ($(date +%s) - started) / 60 ))
  [ -f "$out/model.safetensors" ] || { echo "stretch over: run again to go on"; exit 0; }
  [ "$budget" -gt 0 ] || { echo "stretch over: run again to go on"; exit 0; }
done
echo "| size | parameters | validation content_acc / exact | HumanEval single pass@1 / edit sim | keystroke p50 ms (int8) |"
echo "|---|---|---|---|---|"
for size in $sizes; do
  name=${size%%:*}
  out="$runs/$name"
  [ -f "$runs/$name.quality.json" ] || $cc bench quality --set single --model "$out" > "$runs/$name.quality.json"
  [ -f "$runs/$name.selftest.json" ] || $cc selftest --model "$out" --json > "$runs/$name.selftest.json" || true
  .venv/bin/python - "$out" "$runs/$name" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1] + "/config.json"))["training"]
q = json.load(open(sys.argv[2] + ".quality.json"))
lat = json.load(open(sys.argv[2] + ".selftest.json"))
v = cfg["validation"]
print(f"| {sys.argv[2].rsplit('/', 1)[1]} | {cfg['parameters'] / 1e6:.1f}M | {v['content_acc']} / {v['exact_match']} "
      f"| {q['pass@1']:.2%} / {q['edit_similarity']} | {lat.get('keystroke_ms', {}).get('p50')} |")
PY
done
