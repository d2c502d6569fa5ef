#!/bin/bash
# More alternated drafts on/off pairs (issue 14), drafts off first.
"$(dirname "$0")"/pairs.sh 3 6 30 "false true" selftest && echo done2 >> "$(dirname "$0")"/log.txt
