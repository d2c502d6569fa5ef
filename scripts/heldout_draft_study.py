"""Drafts against the model's own answers, on code the model never saw and that is no benchmark's:
line sites (as `bench repo` chooses them: half after the indentation, half mid-line) in the training
corpus's held-out validation files (`corpus_manifest.json`, split "validation"), each with the rest of
its package as the workspace (the file itself left out of the drafts). Drafts and the model only, no
language server and no compiler check. Per site: the drafts (up to 6, as ``find_drafts`` ranks them),
their ``ranking_features``, the model's marginal and conditioned scores of each (``verify.py``), the
model's own answer, and at a site without a draft the continuations of lines starting with the own
answer's first word.

Sites in files of the training corpus itself flatter every model-dependent rule (the model has seen
the line); these files it has not.

    .venv/bin/python scripts/heldout_draft_study.py collect --part 0 --parts 2 --out results/heldout_drafts/part0.json
    .venv/bin/python scripts/heldout_draft_study.py collect --part 1 --parts 2 --out results/heldout_drafts/part1.json
    .venv/bin/python scripts/heldout_draft_study.py report results/heldout_drafts/part*.json

The report: (1) how often the first draft is the right line where the ranking has a choice, with the
shipped ``RANK_WEIGHTS``, with weights refitted here, and with the model's marginal scores added as
features (conditional logit; two folds by a hash of the file, fitted on one and counted on the other);
(2) by the first draft's source, sites where it is right and the model's own answer not, and the
reverse; (3) at sites without a draft, the first-word lookup's line against the model's own.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from celeris_complete.bench.repo import cut_text  # noqa: E402
from celeris_complete.checks.postprocess import choose_mode, postprocess  # noqa: E402
from celeris_complete.config import load_settings  # noqa: E402
from celeris_complete.drafts import search as drafts
from celeris_complete.drafts.search import MIN_KEY
from celeris_complete.drafts.table import MAX_LINE, draft_tokens
from celeris_complete.engine.pipeline import Engine  # noqa: E402
from celeris_complete.model import diffusion  # noqa: E402
from celeris_complete.model.diffusion import DecodeSettings, diffuse, span_tokens  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_draft_ranking import fit, heldout_files  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DRAFTS = 6
WORD = re.compile(r"\w+")


def model_scores(probs: torch.Tensor, draft: torch.Tensor) -> list[float]:
    """Mean, sum and min log-probability of the draft's tokens, and the share that are the top token."""
    p = probs.float().gather(-1, draft[:, None])[:, 0].clamp(min=1e-30).log()
    return [float(p.mean()), float(p.sum()), float(p.min()), float((probs.argmax(-1) == draft).float().mean())]


def collect(part: int, parts: int, model: str) -> list[dict]:
    torch.set_num_threads(1)
    engine = Engine(load_settings({"model": model}))
    b, s, ids = engine.impl, engine.settings, engine.ids
    judged: list = []
    real_choose = diffusion.choose

    def choose(per_draft, candidates, rule):
        judged.append([model_scores(p, d) for p, d in zip(per_draft, candidates)])
        return real_choose(per_draft, candidates, rule)

    features: list = []
    real_features = drafts.ranking_features

    def ranking_features(*args, **kwargs):
        features.append(real_features(*args, **kwargs))
        return features[-1]

    diffusion.choose, drafts.ranking_features = choose, ranking_features
    rows = []
    for name, files, table, under in heldout_files(Path(model), part, parts):
        for path, fold, sites in under:
            for site in sites:
                text = cut_text(files[path], site)
                cut = sum(len(line) + 1 for line in text.split("\n")[: site.line]) + site.col
                prefix, suffix = text[:cut], text[cut:]
                features.clear()
                found = drafts.find_drafts(prefix, suffix, table, path, DRAFTS)
                mode = choose_mode(prefix, "auto")
                expected = site.expected.rstrip()

                def right(t: str) -> bool:
                    return postprocess(t, prefix, suffix, mode).split("\n")[0].rstrip() == expected  # noqa: B023

                texts = [d.text for d in found]
                row = {
                    "package": name, "file": path, "line": site.line, "kind": site.kind, "mode": mode, "fold": fold,
                    "sources": [d.source for d in found], "right": [right(t) for t in texts],
                    "rank": [list(features[0][t][:-1]) if features and t in features[0] else None for t in texts],
                }  # fmt: skip
                canvas = s.canvas_line if mode == "line" else s.canvas_block
                ctx = b.context(prefix, suffix, s.prefix_tokens, min(s.suffix_tokens, engine.max_context // 4),
                                True, True, (), 0)  # fmt: skip
                line = "" if "\n" in ctx.heal else prefix[prefix.rfind("\n") + 1 : len(prefix) - len(ctx.heal)]
                end, tail = ([ids.eos], "") if mode == "line" else ([], "\n")
                tokens = [draft_tokens(engine.tok.encode, line[-MAX_LINE:], ctx.heal + t + tail) + end for t in texts]
                candidates = [torch.tensor(t[:canvas]) for t in tokens]
                allowed = b.tokens_starting_with(ctx.heal) if ctx.heal else None
                penalty = s.eos_penalty_line if mode == "line" and s.eos_penalty_line is not None else s.eos_penalty
                settings = DecodeSettings(steps=s.steps, threshold=s.threshold, eos_penalty=penalty)
                engine.cache.clear()  # every site encoded whole: its scores do not depend on the site before
                with torch.inference_mode():
                    kv, _ = b.encode(ctx)
                    for key, conditioned in (("marginal", False), ("conditioned", True)):
                        judged.clear()
                        if candidates:
                            diffuse(b.model, kv, canvas, ids, settings, None, None, allowed, [], candidates, 0.0, [],
                                    draft_conditioned=conditioned, draft_chosen=[])  # fmt: skip
                        row[key] = judged[0] if judged else []
                    out, _ = diffuse(b.model, kv, canvas, ids, settings, None, None, allowed, [])
                raw = engine.tok.decode(span_tokens(out[0], ids.eos))
                own = postprocess(raw[len(ctx.heal) :] if raw.startswith(ctx.heal) else raw, prefix, suffix, mode)
                row["own_right"] = right(own)
                word = WORD.match(own)
                if not found and word and len(word.group()) >= MIN_KEY:
                    after = drafts.find_drafts(prefix + word.group(), suffix, table, path, 1)
                    row["first_word"] = [(d.source, right(word.group() + d.text)) for d in after]
                rows.append(row)
        print(f"{name}: {len(rows)} sites so far", flush=True)
    return rows


def report(rows: list[dict]) -> dict:
    def choice(fold: int, with_model: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for r in rows:
            if r["fold"] == fold and len(r["right"]) > 1 and all(f is not None for f in r["rank"]):
                x = [f + (m if with_model else []) for f, m in zip(r["rank"], r["marginal"])]
                out.append((torch.tensor(x), torch.tensor(r["right"]), None))
        return out

    def top1(data, w: torch.Tensor) -> int:
        return sum(int(y[int((x[:, : len(w)] @ w).argmax())]) for x, y, _ in data)

    shipped = torch.tensor(drafts.RANK_WEIGHTS)
    ranking = []
    for fitted, counted in ((0, 1), (1, 0)):
        plain, scored = choice(counted, False), choice(counted, True)
        ranking.append({
            "counted_fold": counted, "sites_with_a_choice": len(plain),
            "with_a_right_draft": sum(int(y.any()) for _, y, _ in plain),
            "first_right_shipped_weights": top1(plain, shipped),
            "first_right_refitted": top1(plain, fit(choice(fitted, False), epochs=400, standardize=True)),
            "first_right_with_model_scores": top1(scored, fit(choice(fitted, True), epochs=400, standardize=True)),
        })  # fmt: skip
    by_source: Counter = Counter()
    for r in rows:
        if r["right"]:
            key = f"{r['mode']} {r['sources'][0]}"
            by_source[key, "sites"] += 1
            by_source[key, "first draft right"] += r["right"][0]
            by_source[key, "draft right, own wrong"] += r["right"][0] and not r["own_right"]
            by_source[key, "own right, draft wrong"] += r["own_right"] and not r["right"][0]
    first_word: Counter = Counter()
    for r in rows:
        if not r["right"]:
            first_word[r["mode"], "sites without a draft"] += 1
            first_word[r["mode"], "own right"] += r["own_right"]
            found = [ok for source, ok in r.get("first_word", []) if source in ("document", "workspace")]
            if found:
                first_word[r["mode"], "first-word line found"] += 1
                first_word[r["mode"], "it right, own wrong"] += found[0] and not r["own_right"]
                first_word[r["mode"], "own right, it wrong"] += r["own_right"] and not found[0]
    nest = lambda c: {f"{a}: {b}": v for (a, b), v in sorted(c.items())}  # noqa: E731
    return {
        "sites": len(rows), "files": len({(r["package"], r["file"]) for r in rows}),
        "sites_with_a_draft": sum(bool(r["right"]) for r in rows),
        "ranking": ranking, "draft_or_own": nest(by_source), "first_word": nest(first_word),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--part", type=int, default=0)
    c.add_argument("--parts", type=int, default=1)
    c.add_argument("--model", default=str(ROOT / "models" / "default"))
    c.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("report")
    r.add_argument("parts", nargs="+", type=Path)
    r.add_argument("--output", type=Path)
    args = ap.parse_args()
    if args.command == "collect":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(collect(args.part, args.parts, args.model)) + "\n")
        return
    result = report([row for p in args.parts for row in json.loads(p.read_text())])
    print(json.dumps(result, indent=1))
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
