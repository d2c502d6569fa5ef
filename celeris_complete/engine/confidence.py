"""How likely an answer is to be right as shown, from what the engine knows about it: the model's
probabilities over the refinement steps (``SpanTrace``), how much the prediction moved between steps,
the draft's source, votes and how much of it the model kept, the compiler's verdict, the mode and the
cursor's place in its line.

``features`` turns them into named numbers (plain floats: no tensors, no numpy).  ``Calibrator`` is a
logistic regression over them and the pairwise products of the ``CORE`` ones, fitted on sites in the
training corpus's held-out files (``bench calibrate``) and shipped beside the model
(``confidence.json``); it runs in pure Python, a few hundred multiplications per answer.
"""

from __future__ import annotations

import builtins
import json
import keyword
import math
import re
from collections.abc import Mapping
from itertools import combinations
from pathlib import Path

from celeris_complete.errors import CelerisError
from celeris_complete.model.diffusion import SpanTrace

DRAFT_SOURCES = ("typing-cache", "previous", "import", "syntax", "document", "workspace", "line-end", "context")
VERDICTS = ("ok", "elsewhere", "reindented", "shortened", "closed", "replaced", "kept", "withheld")
FLOOR = 1e-6  # probabilities below this count as this (a log of 0 would be -inf)
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
COMMON = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | {"self", "cls"}
NEAR = 20_000  # characters each side of the cursor that the names are looked for in


def _log(p: float) -> float:
    return math.log(max(p, FLOOR))


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _has_word(text: str, word: str) -> bool:
    """Whether ``word`` stands in ``text`` as a whole word (``str.find``: no regular expression to build)."""
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or not _is_word_char(text[at - 1])) and (end == len(text) or not _is_word_char(text[end])):
            return True
        at = text.find(word, at + 1)
    return False


def features(
    trace: SpanTrace | None,
    span_len: int,
    steps_run: int,
    offered: Mapping | None,
    verdict: str,
    mode: str,
    prefix: str,
    suffix: str,
    text: str,
    after_cursor: str,
    heal: str,
) -> dict[str, float]:
    """The answer's features by name (see the module doc).  ``span_len``: the span's tokens before its
    end; ``after_cursor``: the decoded span from the cursor on, before post-processing (``text`` is what
    is shown)."""
    f: dict[str, float] = {}
    if trace is not None:
        canvas = len(trace.prob)
        span = trace.prob[:span_len] or [trace.prob[0] if canvas else 1.0]
        logs = [_log(p) for p in span]
        f["log_p_min"] = min(logs)
        f["log_p_mean"] = sum(logs) / len(logs)
        f["log_p_first"] = logs[0]
        f["log_p_end"] = _log(trace.prob[span_len]) if span_len < canvas else 0.0  # a full canvas ends itself
        steps = trace.step[: span_len + 1]
        f["share_first_step"] = sum(s == 0 for s in steps) / max(1, len(steps))
        f["flips"] = sum(trace.flips) / max(1, canvas)
        f["forced"] = float(trace.forced)
        f["draft_score"] = trace.draft_score if trace.draft_score is not None else 0.0
    f["steps_run"] = float(steps_run)
    source = offered.get("source") if offered else None
    for name in DRAFT_SOURCES:
        f[f"draft_{name}"] = float(source == name)
    if offered:
        tokens, kept = int(offered.get("tokens") or 0), int(offered.get("kept") or 0)
        f["draft_votes"] = math.log1p(int(offered.get("votes") or 0))
        f["draft_kept_share"] = kept / max(1, tokens)
        f["draft_whole"] = float(tokens > 0 and kept >= tokens)
        f["draft_candidates"] = float(offered.get("candidates") or 0)
    else:
        f["draft_votes"] = f["draft_kept_share"] = f["draft_whole"] = f["draft_candidates"] = 0.0
    for name in VERDICTS:
        f[f"syntax_{name}"] = float(verdict == name)
    f["syntax_unchecked"] = float(verdict == "")
    line_before = prefix[prefix.rfind("\n") + 1 :]
    line_after = suffix.split("\n", 1)[0]
    f["line_mode"] = float(mode == "line")
    f["blank_line"] = float(not line_before.strip() and not line_after.strip())
    f["after_indentation"] = float(bool(line_before) and not line_before.strip())
    f["typed_on_line"] = math.log1p(len(line_before.strip()))
    f["rest_of_line"] = float(bool(line_after.strip()))
    f["healed"] = float(bool(heal))
    f["span_tokens"] = math.log1p(span_len)
    f["answer_chars"] = math.log1p(len(text))
    f["answer_lines"] = float(text.count("\n") + 1 if text else 0)
    f["cut"] = float(len(text) < len(after_cursor.rstrip()))
    # Names the answer uses that the text around the cursor never does: a model's invention, often.
    first = text.split("\n", 1)[0]
    near = prefix[-NEAR:] + suffix[:NEAR]
    names = {w for w in WORD.findall(first) if w not in COMMON}
    unknown = sum(not _has_word(near, w) for w in names)
    f["unknown_names"] = math.log1p(unknown)
    f["known_share"] = (len(names) - unknown) / len(names) if names else 1.0
    whole = (line_before + first).strip()
    f["line_elsewhere"] = float(bool(first.strip()) and whole in near)  # the line, as it would read, is there
    return f


FEATURES = tuple(sorted(features(SpanTrace([0.5], [0], [], False, None), 0, 1, None, "", "line", "", "", "", "", "")))
# The features whose pairwise products and squares the calibrator also weighs (how much a probability
# says depends on where the answer came from and how much of the line was typed).
CORE = ("log_p_min", "log_p_mean", "log_p_first", "log_p_end", "draft_score", "draft_kept_share", "typed_on_line",
        "after_indentation", "flips", "share_first_step", "answer_chars", "draft_votes", "unknown_names", "known_share",
        "line_elsewhere")  # fmt: skip
FORMAT = "celeris-confidence-v2"
FILE = "confidence.json"
# Where the cursor is, which changes what the same numbers mean: a line left empty (nothing before the
# cursor on its line: what follows a line break, and HumanEval-Infilling's holes), the cursor after the
# indentation, or mid-line after some of the line was typed.  Each place has a model and a threshold of
# its own (most answers on an empty line are wrong; one threshold for all hid most right ones there).
PLACES = ("blank", "indent", "mid")


def place(f: Mapping[str, float]) -> str:
    """The cursor's place (``PLACES``) from an answer's features."""
    if f.get("typed_on_line", 0.0) > 0:
        return "mid"
    return "indent" if f.get("after_indentation", 0.0) else "blank"


def expand(f: Mapping[str, float], names: tuple[str, ...] = FEATURES, core: tuple[str, ...] = CORE) -> list[float]:
    """The calibrator's inputs: the features in ``names`` order (a missing one is 0), then the products
    of every pair of ``core`` features and their squares."""
    base = [float(f.get(n, 0.0)) for n in names]
    c = [float(f.get(n, 0.0)) for n in core]
    return base + [a * b for a, b in combinations(c, 2)] + [a * a for a in c]


class _Logistic:
    """One place's standardized logistic regression and its recommended threshold."""

    def __init__(self, spec: Mapping, width: int) -> None:
        if not all(len(spec[k]) == width for k in ("mean", "scale", "weights")):
            raise ValueError("mean, scale and weights do not match the features")
        self.mean = [float(v) for v in spec["mean"]]
        self.scale = [float(v) or 1.0 for v in spec["scale"]]
        self.weights = [float(v) for v in spec["weights"]]
        self.bias = float(spec["bias"])
        self.min_confidence = float(spec.get("min_confidence", 0.0))

    def predict(self, x: list[float]) -> float:
        z = self.bias + sum(w * (v - m) / s for w, v, m, s in zip(self.weights, x, self.mean, self.scale))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


class Calibrator:
    """``predict(features) -> probability`` and ``threshold(features)``, the recommended ``min_confidence``
    at the answer's place, from a fitted ``confidence.json`` (see ``bench/calibration.py``)."""

    def __init__(self, spec: Mapping) -> None:
        if spec.get("format") != FORMAT:
            raise ValueError(f"format {spec.get('format')!r}, not {FORMAT}")
        names, core = tuple(spec["features"]), tuple(spec["core"])
        if set(names) != set(FEATURES) or not set(core) <= set(FEATURES):
            raise ValueError("its features are not the ones this engine computes (fitted by another version?)")
        missing = [p for p in PLACES if p not in spec["places"]]
        if missing:
            raise ValueError(f"no model for the place(s) {', '.join(missing)}")
        width = len(names) + len(core) * (len(core) - 1) // 2 + len(core)
        self.names, self.core = names, core
        self.places = {p: _Logistic(spec["places"][p], width) for p in PLACES}
        self.spec = dict(spec)

    @classmethod
    def load(cls, path: Path) -> Calibrator | None:
        """The model directory's calibrator (None: it ships none); a broken file is a clear error."""
        file = Path(path) / FILE
        if not file.is_file():
            return None
        try:
            return cls(json.loads(file.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CelerisError(f"{file}: not a confidence calibration this engine can use ({exc})") from None

    def predict(self, f: Mapping[str, float]) -> float:
        return self.places[place(f)].predict(expand(f, self.names, self.core))

    def threshold(self, f: Mapping[str, float]) -> float:
        """The recommended ``min_confidence`` where this answer's cursor is."""
        return self.places[place(f)].min_confidence

    @property
    def thresholds(self) -> dict[str, float]:
        return {p: m.min_confidence for p, m in self.places.items()}
