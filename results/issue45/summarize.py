"""The tables of this folder's README from `bench repo --output` files, and their summaries (the JSON less
its per-site lists): ``python summarize.py RUNS_DIR [SUMMARIES_DIR]``."""

import json
import sys
from pathlib import Path

from celeris_complete.bench.repo import without_sites

COLUMNS = ("language", "seed", "sites", "exact, shown", "exact, every answer", "edit similarity", "empty",
           "wrong shown", "wrong, shown + held back", "withheld (foreign)", "latency p50 / p95 ms")  # fmt: skip


def row(lang: str, seed: str, o: dict) -> str:
    every = (o["right_shown"] + o["right_hidden"]) / o["sites"]
    cells = (lang, seed, o["sites"], f"{o['exact_match']:.1%}", f"{every:.1%}", f"{o['edit_similarity']:.3f}",
             f"{o['empty_rate']:.1%}", o["wrong_shown"], o["wrong_shown"] + o["wrong_hidden"],
             o.get("foreign_withheld", ""), f"{o['latency_ms_p50']:.0f} / {o['latency_ms_p95']:.0f}")  # fmt: skip
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main() -> None:
    src = Path(sys.argv[1])
    dst = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for f in sorted(src.glob("*-s[0-9].json")):
        d = json.loads(f.read_text())
        lang, seed = f.stem.rsplit("-s", 1)
        print(row(lang, seed, d["overall"]))
        if dst:
            dst.mkdir(parents=True, exist_ok=True)
            (dst / f"{f.stem}.summary.json").write_text(json.dumps(without_sites(d), indent=1) + "\n")


if __name__ == "__main__":
    main()
