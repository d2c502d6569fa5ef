#!/bin/bash
# Latency with drafts on/off and with adaptation on/off, alternated, on a quiet machine (issue 14).
cd "$(dirname "$0")/../../.." || exit 1
D=results/issue14/quiet
uptime > $D/uptime.txt
$D/pairs.sh 1 2 30 "true false" selftest
for i in 1 2; do
  for a in false true; do
    .venv/bin/celeris-complete bench lsp --seconds 30 --think-s 1.5 --set adapt=$a \
      --output $D/lsp_think1.5_adapt_${a}_$i.json >>$D/log.txt 2>&1
    uptime >> $D/uptime.txt
  done
done
echo done >> $D/log.txt
