"""A calibrated probability that an answer is right as shown, from its ``features``: an L2-penalized
logistic regression (Newton's method on standardized features), its expected calibration error, and
what a threshold on it keeps: right answers kept, wrong answers still shown (both as shares of what is
shown without a threshold), precision and coverage.  Numpy only; the fitted weights are plain lists
that the engine applies without numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from celeris_complete.engine.confidence import CORE, FEATURES, FORMAT, PLACES, expand, place

L2 = 10.0  # penalty on the standardized weights (the bias is free): 10 held best out of fold among 0.1-30
KEEP = 0.93  # each place's threshold keeps this share of its right answers on the fit set (a margin over 90%)
MIN_SHOWN = 50  # answers shown at a place, at least, to fit its model


def matrix(rows: Sequence[Mapping[str, float]], names: Sequence[str]) -> np.ndarray:
    return np.array([[float(r.get(n, 0.0)) for n in names] for r in rows], dtype=np.float64)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2, iterations: int = 50) -> dict:
    """Weights on standardized columns: ``{"mean", "scale", "weights", "bias"}`` (lists and a float)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0  # a constant column: weight 0 through the penalty
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return {"mean": mean.tolist(), "scale": scale.tolist(), "weights": w[:-1].tolist(), "bias": float(w[-1])}


def predict(model: Mapping, x: np.ndarray) -> np.ndarray:
    z = (x - np.array(model["mean"])) / np.array(model["scale"])
    return 1.0 / (1.0 + np.exp(-(z @ np.array(model["weights"]) + model["bias"])))


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error: over equal-width bins of ``p``, the share of answers in each times
    the gap between its mean probability and its share right."""
    edges = np.minimum((p * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        inside = edges == b
        if inside.any():
            total += inside.mean() * abs(p[inside].mean() - y[inside].mean())
    return float(total)


def reliability(p: np.ndarray, y: np.ndarray, bins: int = 10) -> list[dict]:
    edges = np.minimum((p * bins).astype(int), bins - 1)
    return [
        {"bin": f"{b / bins:.1f}-{(b + 1) / bins:.1f}", "answers": int((edges == b).sum()),
         "mean_p": round(float(p[edges == b].mean()), 4), "right": round(float(y[edges == b].mean()), 4)}
        for b in range(bins) if (edges == b).any()
    ]  # fmt: skip


def at_threshold(p: np.ndarray, y: np.ndarray, t: float | np.ndarray) -> dict:
    """What showing only answers with ``p >= t`` keeps, against showing them all (``t``: one threshold,
    or one per answer)."""
    shown = p >= t
    right, wrong = int((y == 1).sum()), int((y == 0).sum())
    kept_right, kept_wrong = int((shown & (y == 1)).sum()), int((shown & (y == 0)).sum())
    return {
        **({"threshold": round(float(t), 4)} if np.ndim(t) == 0 else {}),
        "shown": int(shown.sum()),
        "right_shown": kept_right,
        "wrong_shown": kept_wrong,
        "right_kept": round(kept_right / max(1, right), 4),
        "wrong_kept": round(kept_wrong / max(1, wrong), 4),
        "precision": round(kept_right / max(1, int(shown.sum())), 4),
        "coverage": round(float(shown.mean()), 4) if len(p) else 0.0,
    }


def curve(p: np.ndarray, y: np.ndarray, points: int = 101) -> list[dict]:
    return [at_threshold(p, y, t) for t in np.linspace(0.0, 1.0, points)]


def choose_threshold(p: np.ndarray, y: np.ndarray, keep: float = 0.93) -> float:
    """The largest threshold that still shows at least ``keep`` of the right answers."""
    right = np.sort(p[y == 1])
    if not len(right):
        return 0.0
    k = int(np.floor((1.0 - keep) * len(right)))
    return float(right[min(k, len(right) - 1)])


def shown_rows(rows: Sequence[Mapping]) -> list[Mapping]:
    """The sites where an answer was shown (an empty one is no answer to judge)."""
    return [r for r in rows if r.get("answer") and r.get("got")]


def fit_confidence(rows: Sequence[Mapping], keep: float = KEEP, l2: float = L2) -> tuple[dict, dict]:
    """The calibration (``confidence.json``'s content) and its report, from collected sites (rows with
    ``features``, ``exact`` and ``fold``, as ``bench/heldout.collect`` gives them).  A model per place of
    the cursor (``PLACES``), each cross-validated over two folds by file: each half is predicted by a fit
    on the other (out-of-fold probabilities), the place's threshold is chosen on them to keep ``keep`` of
    its right answers, and the weights shipped are fitted on both halves.  The expected calibration error
    is reported per fold over all places."""
    shown = shown_rows(rows)
    places = np.array([place(r["features"]) for r in shown])
    counts = {p: int((places == p).sum()) for p in PLACES}
    few = [f"{p} ({n})" for p, n in counts.items() if n < MIN_SHOWN]
    if few:
        raise ValueError(
            f"too few answers shown to fit a calibration at: {', '.join(few)}; at least {MIN_SHOWN} each "
            "(empty lines come from --blank-per-file)"
        )
    x = np.array([expand(r["features"]) for r in shown])
    y = np.array([float(r["exact"]) for r in shown])
    folds = np.array([int(r["fold"]) for r in shown])
    oof, thresholds = np.zeros(len(y)), np.zeros(len(y))
    models: dict[str, dict] = {}
    for name in PLACES:
        here = places == name
        for k in (0, 1):
            model = fit_logistic(x[here & (folds != k)], y[here & (folds != k)], l2)
            oof[here & (folds == k)] = predict(model, x[here & (folds == k)])
        threshold = choose_threshold(oof[here], y[here], keep)
        thresholds[here] = threshold
        models[name] = {**fit_logistic(x[here], y[here], l2), "min_confidence": round(threshold, 4)}
    spec = {"format": FORMAT, "features": list(FEATURES), "core": list(CORE), "places": models}
    report = {
        "sites": len(rows),
        "shown": len(shown),
        "right": int(y.sum()),
        "sources": len({r["source"] for r in rows}),
        "files": len({(r["source"], r["file"]) for r in rows}),
        "l2": l2,
        "keep": keep,
        "ece_per_fold": [round(ece(oof[folds == k], y[folds == k]), 4) for k in (0, 1)],
        "at_default": at_threshold(oof, y, thresholds),
        "per_place": {
            p: {"shown": counts[p], "right": int(y[places == p].sum()),
                **at_threshold(oof[places == p], y[places == p], models[p]["min_confidence"])}
            for p in PLACES
        },  # fmt: skip
        "reliability": reliability(oof, y),
        "curve": curve(oof, y, 51),
    }
    spec["fit"] = {k: report[k] for k in ("sites", "shown", "right", "sources", "files", "l2", "keep", "ece_per_fold")}
    extra = {"out_of_fold": oof.round(4).tolist(), "labels": y.astype(int).tolist(), "thresholds": thresholds.tolist()}
    return spec, {**report, **extra}


def plot(path: Path, p: np.ndarray, y: np.ndarray, threshold: float | np.ndarray, title: str = "") -> None:
    """A reliability diagram and the precision/coverage curve (one threshold for all answers), side by side,
    as a PNG; the point marked is ``threshold``'s (one per answer: each place's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    bins = reliability(p, y)
    left.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    left.plot([b["mean_p"] for b in bins], [b["right"] for b in bins], marker="o")
    left.set(xlabel="confidence", ylabel="share right", title=f"reliability (ECE {ece(p, y):.3f})",
             xlim=(0, 1), ylim=(0, 1))  # fmt: skip
    points = curve(p, y, 101)
    right.plot([c["coverage"] for c in points], [c["precision"] for c in points])
    at = at_threshold(p, y, threshold)
    label = f"min_confidence {threshold:.3f}" if np.ndim(threshold) == 0 else "min_confidence per place"
    right.scatter([at["coverage"]], [at["precision"]], color="red", zorder=3, label=label)
    right.set(xlabel="coverage (answers shown)", ylabel="precision (shown that are right)", xlim=(0, 1), ylim=(0, 1),
              title="precision / coverage")  # fmt: skip
    right.legend(loc="upper right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
