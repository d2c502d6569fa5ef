#!/bin/bash
# More alternated drafts on/off pairs (issue 14's latency target), quiet machine.
cd "$(dirname "$0")/../../.." || exit 1
D=results/issue14/quiet
C=.venv/bin/celeris-complete
for i in 3 4 5 6; do
  for d in false true; do
    CELERIS_DRAFTS=$d $C selftest --json > $D/selftest_drafts_${d}_$i.json 2>>$D/log.txt
    $C bench lsp --seconds 30 --set drafts=$d --output $D/lsp_drafts_${d}_$i.json >>$D/log.txt 2>&1
    uptime >> $D/uptime.txt
  done
done
echo done2 >> $D/log.txt
