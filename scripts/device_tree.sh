#!/bin/sh
# The device tool sends the working tree (tracked and untracked-not-ignored files, plus what `carry`
# names) and refuses more than 64 MiB; results/ alone is about 40 MB. Around a device call:
#   sh scripts/device_tree.sh out    # results/ leaves the index (the files stay on disk); prints the size
#   run(...)                         # the device call
#   sh scripts/device_tree.sh back   # results/ back in the index as it was at HEAD
# Changes staged under results/ are unstaged by `out` (never lost: the files stay); stage them again.
set -eu
cd "$(dirname "$0")/.."
exclude="$(git rev-parse --git-dir)/info/exclude"
note="# added by scripts/device_tree.sh out (its 'back' removes these two lines)"
case "${1:-}" in
  out)
    git rm -r -q --cached results
    grep -qxF "$note" "$exclude" 2>/dev/null || printf '%s\n/results/\n' "$note" >> "$exclude"
    ;;
  back)
    git reset -q -- results
    if [ -f "$exclude" ] && grep -qxF "$note" "$exclude"; then
      awk -v note="$note" '$0 == note { skip = 1; next } skip && $0 == "/results/" { skip = 0; next } { skip = 0; print }' \
        "$exclude" > "$exclude.tmp"
      mv "$exclude.tmp" "$exclude"
    fi
    ;;
  *)
    echo "usage: sh scripts/device_tree.sh out|back" >&2
    exit 2
    ;;
esac
bytes=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 du -cb 2>/dev/null | awk 'END {print $1}')
echo "the working tree that travels: $((bytes / 1048576)) MiB (limit 64 MiB with the carried paths)"
