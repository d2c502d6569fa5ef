#!/bin/bash
# Latency with drafts on/off and with adaptation on/off, alternated, on a quiet machine (issue 14).
cd "$(dirname "$0")/../../.." || exit 1
D=results/issue14/quiet
C=.venv/bin/celeris-complete
uptime > $D/uptime.txt
for i in 1 2; do
  for d in true false; do
    CELERIS_DRAFTS=$d $C selftest --json > $D/selftest_drafts_${d}_$i.json 2>>$D/log.txt
    $C bench lsp --seconds 30 --set drafts=$d --output $D/lsp_drafts_${d}_$i.json >>$D/log.txt 2>&1
    uptime >> $D/uptime.txt
  done
done
for i in 1 2; do
  for a in false true; do
    $C bench lsp --seconds 30 --think-s 1.5 --set adapt=$a --output $D/lsp_think1.5_adapt_${a}_$i.json >>$D/log.txt 2>&1
    uptime >> $D/uptime.txt
  done
done
echo done >> $D/log.txt
