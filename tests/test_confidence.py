"""An answer's confidence features (engine/confidence.py) and the calibration fitted on them
(bench/calibration.py)."""

import json
import math

import numpy as np
import pytest

from celeris_complete.bench import calibration as cal
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.engine.confidence import (
    CORE,
    DRAFT_SOURCES,
    FEATURES,
    FORMAT,
    Calibrator,
    expand,
    features,
    place,
)
from celeris_complete.model.diffusion import SpanTrace


def test_features_read_the_trace_the_draft_the_verdict_and_the_cursor():
    trace = SpanTrace([0.5, 0.25, 0.9, 1.0], [0, 1, 1, 1], [2], False, -0.7)
    offered = {"source": "workspace", "votes": 3, "tokens": 4, "kept": 2, "candidates": 1}
    f = features(trace, 2, 2, offered, "ok", "line", "def f(x):\n    return x.", "\n", "up()", "up()\n", "")
    assert f["log_p_min"] == pytest.approx(math.log(0.25)) and f["log_p_first"] == pytest.approx(math.log(0.5))
    assert f["log_p_mean"] == pytest.approx((math.log(0.5) + math.log(0.25)) / 2)
    assert f["log_p_end"] == pytest.approx(math.log(0.9))  # the slot after the span: its end
    assert f["share_first_step"] == pytest.approx(1 / 3) and f["flips"] == pytest.approx(0.5)
    assert f["draft_score"] == pytest.approx(-0.7) and f["draft_kept_share"] == 0.5 and f["draft_whole"] == 0.0
    assert [s for s in DRAFT_SOURCES if f[f"draft_{s}"]] == ["workspace"] and f["draft_votes"] == math.log1p(3)
    assert f["syntax_ok"] == 1.0 and f["syntax_unchecked"] == 0.0
    assert f["line_mode"] == 1.0 and f["typed_on_line"] == math.log1p(len("return x."))
    assert f["rest_of_line"] == 0.0 and f["blank_line"] == 0.0 and f["after_indentation"] == 0.0
    assert f["cut"] == 0.0 and f["answer_lines"] == 1.0
    assert f["unknown_names"] == math.log1p(1) and f["known_share"] == 0.0  # "up" is used nowhere around
    g = features(None, 0, 1, None, "ok", "line", "y = x.up()\nz = x", "\n", ".up()", ".up()", "")
    assert g["unknown_names"] == 0.0 and g["known_share"] == 1.0 and g["line_elsewhere"] == 0.0
    h = features(None, 0, 1, None, "ok", "line", "z = x.up()\nz = x", "\n", ".up()", ".up()", "")
    assert h["line_elsewhere"] == 1.0  # "z = x.up()" is a line above
    assert features(None, 0, 1, None, "ok", "line", "y = x.upper()\nz = x", "\n", ".up()", "", "")["known_share"] == 0.0
    none = features(None, 0, 1, None, "", "block", "\n    ", "", "", "", "")
    assert "log_p_min" not in none and none["after_indentation"] == 1.0 and none["syntax_unchecked"] == 1.0


def test_every_answer_of_the_engine_carries_its_features(tiny_model_dir, tmp_path):
    engine = Engine(load_settings({"model": str(tiny_model_dir)}, environ={}, user_file=tmp_path / "none"))
    done = engine.complete(InfillRequest("def add(a, b):\n    return ", "\n", language="python"))
    assert done.features is not None and done.features["steps_run"] == done.steps
    assert -math.log(1e6) <= done.features["log_p_min"] <= 0.0


def test_the_fit_is_calibrated_where_the_truth_is_a_logistic_of_the_features():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 3))
    p_true = 1 / (1 + np.exp(-(1.5 * x[:, 0] - x[:, 1] + 0.2)))
    y = (rng.random(4000) < p_true).astype(float)
    model = cal.fit_logistic(x[:2000], y[:2000])
    p = cal.predict(model, x[2000:])
    assert cal.ece(p, y[2000:]) < 0.04 and np.corrcoef(p, p_true[2000:])[0, 1] > 0.98
    assert cal.ece(np.full(2000, 0.9), y[2000:]) > 0.3  # a constant guess is not calibrated


def test_a_threshold_keeps_the_right_share_and_reports_what_it_hides():
    p = np.array([0.9, 0.8, 0.7, 0.6, 0.3, 0.2])
    y = np.array([1, 1, 0, 1, 0, 0])
    t = cal.choose_threshold(p, y, keep=0.66)
    got = cal.at_threshold(p, y, t)
    assert t == 0.8 and got["right_kept"] == pytest.approx(2 / 3, abs=1e-3) and got["wrong_shown"] == 0
    assert cal.at_threshold(p, y, 0.0)["coverage"] == 1.0


def test_the_shipped_calibration_gives_every_answer_a_probability(shipped_model_dir):
    engine = Engine(load_settings({"model": str(shipped_model_dir), "threads": 1}, environ={}))
    thresholds = engine.calibrator.thresholds
    assert engine.min_confidence_in_force() == thresholds and sorted(thresholds) == ["blank", "indent", "mid"]
    assert thresholds["blank"] < thresholds["mid"]  # most answers on an empty line are wrong: a lower bar there
    request = InfillRequest("import os\n\n\ndef list_dir(path):\n    return os.", "\n", mode="line")
    done = engine.complete(request)
    assert done.text.strip() and 0.0 < done.confidence < 1.0
    assert engine.calibrator.predict(done.features) == done.confidence
    assert done.min_confidence == thresholds["mid"]  # the threshold of the cursor's place travels with the answer
    mine = Engine(load_settings({"model": str(shipped_model_dir), "min_confidence": 0.5, "threads": 1}, environ={}))
    assert mine.min_confidence_in_force() == 0.5  # a threshold the user sets wins over the model's, everywhere
    assert mine.complete(request).min_confidence == 0.5


def test_a_broken_calibration_file_is_a_clear_error(shipped_model_dir, tmp_path):
    import shutil

    from celeris_complete.engine.confidence import Calibrator
    from celeris_complete.errors import CelerisError

    broken = tmp_path / "model"
    shutil.copytree(shipped_model_dir, broken)
    (broken / "confidence.json").write_text('{"format": "celeris-confidence-v1", "features": ["x"]}')
    with pytest.raises(CelerisError, match="confidence.json"):
        Calibrator.load(broken)
    (broken / "confidence.json").write_text(
        json.dumps({"format": FORMAT, "features": list(FEATURES), "core": list(CORE), "places": {}})
    )
    with pytest.raises(CelerisError, match="no model for the place"):
        Calibrator.load(broken)
    (broken / "confidence.json").unlink()
    assert Calibrator.load(broken) is None


def test_bench_quality_counts_what_the_threshold_shows_and_holds_back():
    from celeris_complete.bench.quality import TaskResult, quiet_figures

    def task(exact, passed, confidence, empty=False, threshold=0.2):
        return TaskResult("t", passed, exact, 1.0, 1.0, empty, "", "" if empty else "x", confidence, threshold)

    rows = [task(True, True, 0.9), task(True, True, 0.1), task(False, True, 0.05), task(False, False, 0.5),
            task(False, False, 0.01), task(False, False, 0.01, empty=True), task(True, True, None),
            task(False, False, 0.04, threshold=0.03)]  # fmt: skip  (each answer's own threshold: shown)
    got = quiet_figures(rows, {"blank": 0.03})
    assert got["min_confidence"] == {"blank": 0.03}
    counts = {"right_shown": 2, "wrong_shown": 2}
    assert got["exact"] == {**counts, "right_held": 1, "wrong_held": 2, "precision": 0.5, "coverage": round(4 / 7, 4)}
    assert got["passed"] == {**counts, "right_held": 2, "wrong_held": 1, "precision": 0.5, "coverage": round(4 / 7, 4)}


def test_blank_line_sites_remove_whole_lines_and_put_the_cursor_at_the_start():
    from celeris_complete.bench.heldout import blank_sites
    from celeris_complete.bench.repo import cut_text

    text = "import os\n\n# a comment here\ndef f(x):\n    return os.path.join(x)\n"
    sites = blank_sites("m.py", text, 5, "s")
    assert [(s.line, s.col, s.kind) for s in sites] == [(0, 0, "blank"), (3, 0, "blank"), (4, 0, "blank")]
    assert sites[2].expected == "    return os.path.join(x)"  # the indentation is the answer's too
    assert cut_text(text, sites[2]).split("\n")[4] == ""
    assert blank_sites("m.py", text, 2, "s") == blank_sites("m.py", text, 2, "s")  # seeded


def test_each_place_of_the_cursor_has_its_own_model_and_threshold():
    blank = features(None, 0, 1, None, "ok", "line", "x = 1\n", "\ny = 2", "z = 3", "z = 3", "")
    indent = features(None, 0, 1, None, "ok", "line", "def f():\n    ", "\n", "pass", "pass", "")
    mid = features(None, 0, 1, None, "ok", "line", "def f():\n    return x.", "\n", "up()", "up()", "")
    assert [place(f) for f in (blank, indent, mid)] == ["blank", "indent", "mid"]
    width = len(expand(blank))
    one = lambda bias, t: {"mean": [0.0] * width, "scale": [1.0] * width, "weights": [0.0] * width,  # noqa: E731
                           "bias": bias, "min_confidence": t}  # fmt: skip
    spec = {"format": FORMAT, "features": list(FEATURES), "core": list(CORE),
            "places": {"blank": one(-2.0, 0.03), "indent": one(0.0, 0.13), "mid": one(2.0, 0.19)}}  # fmt: skip
    c = Calibrator(spec)
    assert c.predict(blank) == pytest.approx(1 / (1 + math.exp(2.0))) and c.predict(indent) == pytest.approx(0.5)
    assert c.predict(mid) == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert [c.threshold(f) for f in (blank, indent, mid)] == [0.03, 0.13, 0.19]


def test_the_fit_chooses_a_threshold_per_place_keeping_its_share_of_right_answers():
    rng = np.random.default_rng(1)
    rows = []
    for i in range(1800):
        kind = ("blank", "indent", "mid")[i % 3]
        line = {"blank": ("", "", ""), "indent": ("    ", "", ""), "mid": ("    x = ", "", "")}[kind][0]
        right = rng.random() < {"blank": 0.1, "indent": 0.3, "mid": 0.5}[kind]
        f = features(SpanTrace([0.9 if right else 0.4], [0], [], False, None), 1, 1, None, "ok", "line",
                     "a\n" + line, "\n", "b", "b", "")  # fmt: skip
        f["log_p_min"] += rng.normal(0, 0.6)  # noisy evidence of being right
        rows.append({"features": f, "exact": bool(right), "fold": i % 2, "answer": "b", "got": "b",
                     "source": "s", "file": f"f{i % 40}"})  # fmt: skip
    spec, report = cal.fit_confidence(rows)
    assert sorted(spec["places"]) == ["blank", "indent", "mid"]
    for name, here in report["per_place"].items():
        assert here["right_kept"] >= 0.92 and here["threshold"] == spec["places"][name]["min_confidence"]
    assert spec["places"]["blank"]["min_confidence"] < spec["places"]["mid"]["min_confidence"]
    assert Calibrator(spec).predict(rows[0]["features"]) > 0
    with pytest.raises(ValueError, match="too few answers shown"):
        cal.fit_confidence([r for r in rows if place(r["features"]) != "blank"])


def test_bench_repo_rows_give_precision_coverage_and_the_points_to_plot(tmp_path):
    from celeris_complete.bench.calibration import plot
    from celeris_complete.bench.repo import confidence_points, precision_coverage

    def row(exact, empty, confidence, hidden=None, hidden_exact=False, threshold=0.2):
        return {"exact": exact, "empty": empty, "confidence": confidence, "hidden": hidden,
                "hidden_exact": hidden_exact, "min_confidence": threshold}  # fmt: skip

    rows = [row(True, False, 0.9), row(False, False, 0.4), row(False, True, 0.1, "x()", True),
            row(False, True, 0.05, "y()", False, 0.03), row(False, True, None)]  # fmt: skip
    assert precision_coverage(rows) == {"precision": 0.5, "coverage": 0.5}  # 2 shown of 4 answers, 1 right
    p, y, t = confidence_points(rows)
    assert (p, y, t) == ([0.9, 0.4, 0.1, 0.05], [1, 0, 1, 0], [0.2, 0.2, 0.2, 0.03])
    plot(tmp_path / "q.png", np.array(p), np.array(y), np.array(t), "t")
    assert (tmp_path / "q.png").read_bytes()[:4] == b"\x89PNG"
