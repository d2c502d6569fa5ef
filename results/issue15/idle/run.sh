#!/bin/bash
# Issue 15 on an idle machine (2026-12-02), default threads: fresh places and typing clients, batching on and off.
cd "$(dirname "$0")/../../.." || exit 1
D=results/issue15/idle
C=.venv/bin/celeris-complete
for t in fresh typing; do
  for b in batch no-batch; do
    flag=""; [ "$t" = typing ] && flag=--typing
    $C bench serve --clients 1,4,16,64 --seconds 15 $flag --$b --output $D/${t}_$b.json > $D/${t}_$b.md 2>>$D/log.txt
    uptime >> $D/uptime.txt
  done
done
echo done >> $D/log.txt
