"""How often each model's raw span repeats itself on its first line (``check_validvalid``, ``,,,,``: two
slots committed with the same token in one refinement step), beside the answers withheld and exact.

    .venv/bin/python results/issue48/repeated_tokens.py BENCH_ADAPT_FULL.json...
"""

import json
import re
import sys

REPEAT = re.compile(r"(\w{3,})\1|([,.:=])\2{1,}")

for path in sys.argv[1:]:
    d = json.load(open(path))
    for name, p in d["packages"].items():
        for key in ("drafts_on", "drafts_off"):
            if key not in p:
                continue
            for m in ("base", "adapted"):
                res = p[key]["results"][m]
                repeated = sum(bool(REPEAT.search((r.get("raw") or "").split("\n")[0])) for r in res)
                withheld = sum(r.get("syntax") == "withheld" for r in res)
                exact = sum(r["exact"] for r in res)
                print(f"{name} {key} {m}: repeated {repeated}, withheld {withheld}, exact {exact} of {len(res)}")
