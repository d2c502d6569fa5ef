#!/bin/bash
# Alternated drafts on/off pairs on a quiet machine (issue 14): pairs.sh FIRST LAST SECONDS "ORDER" [selftest]
# (ORDER "true false": drafts on first in every pair; "selftest": also the engine's selftest per run).
cd "$(dirname "$0")/../../.." || exit 1
D=results/issue14/quiet
C=.venv/bin/celeris-complete
for i in $(seq "$1" "$2"); do
  for d in $4; do
    if [ "$5" = selftest ]; then
      CELERIS_DRAFTS=$d $C selftest --json > $D/selftest_drafts_${d}_$i.json 2>>$D/log.txt
    fi
    $C bench lsp --seconds "$3" --set drafts=$d --output $D/lsp_drafts_${d}_$i.json >>$D/log.txt 2>&1
    uptime >> $D/uptime.txt
  done
done
