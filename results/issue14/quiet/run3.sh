#!/bin/bash
# After the document search without regexes: drafts on first.
"$(dirname "$0")"/pairs.sh 7 10 30 "true false" && echo done3 >> "$(dirname "$0")"/log.txt
