#!/bin/bash
# After the document search without regexes: drafts on first, 45 s runs.
"$(dirname "$0")"/pairs.sh 11 13 45 "true false" && echo done4 >> "$(dirname "$0")"/log.txt
