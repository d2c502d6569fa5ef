#!/bin/bash
# After the document search without regexes: bench lsp with drafts on/off, alternated (issue 14).
cd "$(dirname "$0")/../../.." || exit 1
D=results/issue14/quiet
C=.venv/bin/celeris-complete
for i in 11 12 13; do
  for d in true false; do
    $C bench lsp --seconds 45 --set drafts=$d --output $D/lsp_drafts_${d}_$i.json >>$D/log.txt 2>&1
    uptime >> $D/uptime.txt
  done
done
echo done4 >> $D/log.txt
