"""Per `bench repo --output` file: answers shown (and every answer, held back ones too) that add a parse
error where the code around the cursor parsed cleanly (checks/grammar.py's window and judgement), and
answers shown with a form only Python has: ``python parse_errors.py RUNS_DIR``."""

import json
import sys
from pathlib import Path

from celeris_complete.bench.repo import Site, site_context
from celeris_complete.bench.repo_languages import LANGUAGES, fetch_source
from celeris_complete.checks.grammar import grammar_window
from celeris_complete.checks.languages import foreign, resolve
from celeris_complete.checks.syntax import judge
from celeris_complete.checks.window import BLAMED


def main() -> None:
    for f in sorted(Path(sys.argv[1]).glob("*-s[0-9].json")):
        d = json.loads(f.read_text())
        lang = d["language"]
        language = resolve(LANGUAGES[lang].language_id)
        shown = shown_bad = every_bad = python_forms = 0
        for name, p in d["packages"].items():
            root = fetch_source(lang, name, p["version"])
            for r in p["results"]:
                text = (root / r["file"]).read_text(encoding="utf-8")
                prefix, suffix = site_context(text, Site(r["file"], r["line"], r["col"], r["kind"], r["expected"]))
                for answer, is_shown in ((r.get("answer") or "", True), (r.get("hidden") or "", False)):
                    if not answer:
                        continue
                    win = grammar_window(prefix, suffix, language, r["file"])
                    bad = win is not None and win.clean and judge(win, answer) == BLAMED
                    every_bad += bad
                    if is_shown:
                        shown += 1
                        shown_bad += bad
                        python_forms += foreign(language, prefix[prefix.rfind("\n") + 1 :], answer)
        print(f"{f.stem}: shown {shown}, shown adding a parse error to a clean window {shown_bad}, "
              f"every answer adding one {every_bad}, shown with a Python form {python_forms}")  # fmt: skip


if __name__ == "__main__":
    main()
