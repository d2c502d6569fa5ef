"""Why bench adapt's answers are empty, per package, drafts setting and model: the compiler's verdict
(``syntax``) or a model span with nothing in it; and the sites empty for one model only, with the raw
span the model wrote.

    .venv/bin/python results/issue48/empty_answers.py BENCH_ADAPT_FULL.json
"""

import json
import sys
from collections import Counter


def cause(r: dict) -> str:
    if not (r.get("raw") or "").strip():
        return "raw span blank"
    return f"syntax:{r['syntax']}" if r.get("syntax") else "other"


def main(path: str) -> None:
    d = json.load(open(path))
    for name, p in d["packages"].items():
        for key in ("drafts_on", "drafts_off"):
            if key not in p:
                continue
            res = p[key]["results"]
            for m in ("base", "adapted"):
                c = Counter(cause(r) for r in res[m] if r["empty"])
                print(name, key, m, sum(c.values()), dict(c))
            pairs = list(zip(res["base"], res["adapted"]))
            only_a = [(x, y) for x, y in pairs if y["empty"] and not x["empty"]]
            only_b = [(x, y) for x, y in pairs if x["empty"] and not y["empty"]]
            print("  empty only adapted:", len(only_a), " only base:", len(only_b))
            for x, y in only_a[:8]:
                raw = (y.get("raw") or "")[:40]
                base = x['got'][:40]
                print(f"   expected={x['expected'][:40]!r} base={base!r} adapted raw={raw!r} {y.get('syntax')}")


if __name__ == "__main__":
    main(sys.argv[1])
