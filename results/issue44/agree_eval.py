"""Out of fold: wrong answers kept at each place's 93%-right threshold, with and without the agreement
of sampled answers among the features: ``python agree_eval.py SITES.json`` (from agree_collect.py)."""

import json
import sys

import numpy as np

from celeris_complete.bench import calibration as cal
from celeris_complete.engine.confidence import CORE, FEATURES, PLACES, expand, place


def first(text: str) -> str:
    return text.split("\n", 1)[0].strip()


def main() -> None:
    rows = json.load(open(sys.argv[1]))["sites"]
    shown = [r for r in rows if r.get("answer") and r.get("got")]
    for r in shown:
        answer, samples, f = first(r["answer"]), r.get("samples") or [], r["features"]
        for k in (2, 4, 6):
            some = samples[:k]
            f[f"agree{k}"] = sum(first(x) == answer for x in some) / len(some) if some else 0.0
        f["distinct6"] = len({first(x) for x in samples}) / len(samples) if samples else 0.0
    print(len(rows), "rows", len(shown), "shown", sum(r["exact"] for r in shown), "right")
    y = np.array([float(r["exact"]) for r in shown])
    folds = np.array([r["fold"] for r in shown])
    places = np.array([place(r["features"]) for r in shown])
    for k in (2, 4, 6):
        a = np.array([r["features"][f"agree{k}"] for r in shown])
        print(f"agree{k}: mean right {a[y == 1].mean():.3f} wrong {a[y == 0].mean():.3f}")

    def run(extra: tuple, extra_core: tuple) -> None:
        names, core = tuple(FEATURES) + extra, tuple(CORE) + extra_core
        x = np.array([expand(r["features"], names, core) for r in shown])
        oof, thr = np.zeros(len(y)), np.zeros(len(y))
        for p in PLACES:
            h = places == p
            for k in (0, 1):
                m = cal.fit_logistic(x[h & (folds != k)], y[h & (folds != k)])
                oof[h & (folds == k)] = cal.predict(m, x[h & (folds == k)])
            thr[h] = cal.choose_threshold(oof[h], y[h], 0.93)
        at = cal.at_threshold(oof, y, thr)
        per = {p: cal.at_threshold(oof[places == p], y[places == p], thr[places == p][0])["wrong_kept"] for p in PLACES}
        print(f"{extra!s:40} (products: {extra_core!s:12}) right kept {at['right_kept']:.3f} "
              f"wrong kept {at['wrong_kept']:.3f} ece {cal.ece(oof, y):.3f} {per}")  # fmt: skip

    run((), ())
    for k in (2, 4, 6):
        run((f"agree{k}",), ())
        run((f"agree{k}",), (f"agree{k}",))
    run(("agree6", "distinct6"), ("agree6",))


if __name__ == "__main__":
    main()
