"""The benchmark commands run end to end on quick subsets, so that they cannot rot."""

import json
import subprocess
import sys


def cli(*args, timeout=600):
    r = subprocess.run(
        [sys.executable, "-m", "celeris_complete.cli", *args], capture_output=True, text=True, timeout=timeout
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def counts(quiet: dict) -> list[int]:
    return [quiet[k] for k in ("right_shown", "wrong_shown", "right_held", "wrong_held")]


def test_quality_quick_subset_on_the_shipped_model(tmp_path):
    out = tmp_path / "q.json"
    png = tmp_path / "q.png"
    summary = json.loads(cli("bench", "quality", "--limit", "8", "--output", str(out), "--plot", str(png)))
    assert png.read_bytes()[:4] == b"\x89PNG"  # the reliability diagram and precision/coverage curve
    assert summary["tasks"] == 8 and 0 <= summary["pass@1"] <= 1
    assert summary["settings"]["eos_penalty"] == 1.0  # the model's recommended setting, as used
    quiet = summary["quiet"]  # the language server's rule at the model's recommended min_confidence
    answered = round(8 * (1 - summary["empty_rate"]))
    assert set(quiet["min_confidence"]) == {"blank", "indent", "mid"} and 0 < quiet["min_confidence"]["blank"] < 1
    assert sum(counts(quiet["exact"])) == sum(counts(quiet["passed"])) == answered
    assert quiet["exact"]["right_shown"] + quiet["exact"]["right_held"] == round(8 * summary["exact_match"])
    results = json.loads(out.read_text())["results"]
    assert len(results) == 8 and all(r["reason"] for r in results)
    multi = json.loads(cli("bench", "quality", "--set", "multi", "--limit", "3", "--steps", "2"))
    assert multi["tasks"] == 3 and multi["settings"]["steps"] == 2


def test_tune_sweeps_each_knob_and_chooses(tiny_model_dir, tmp_path):
    out = tmp_path / "tune.json"
    text = cli("bench", "tune", "--model", str(tiny_model_dir), "--limit", "2", "--output", str(out))
    result = json.loads(out.read_text())
    assert set(result["chosen"]) == {"steps", "threshold", "canvas_line", "prefix_tokens"}
    assert len(result["rows"]) >= 12 and all(r["tasks"] == 2 for r in result["rows"])  # every grid value
    assert "chosen (keystroke p50 <= 25.0 ms, p95 <= 100.0 ms)" in text
    # Greedy decoding is deterministic: a second run may take the quality figures and re-measure latency.
    again = tmp_path / "again.json"
    cli("bench", "tune", "--model", str(tiny_model_dir), "--limit", "2", "--reuse", str(out), "--output", str(again))

    def by_setting(path):  # the points swept depend on measured latency; a point's quality does not
        rows = json.loads(path.read_text())["rows"]
        return {tuple(r[k] for k in result["chosen"]): r["edit_similarity"] for r in rows}

    first, second = by_setting(out), by_setting(again)
    shared = first.keys() & second.keys()
    assert len(shared) >= 6 and all(first[k] == second[k] for k in shared)


def test_latency_runs_both_levels(tiny_model_dir, tmp_path):
    text = cli(
        "bench", "latency", "--model", str(tiny_model_dir), "--seconds", "3", "--steps", "1,2",
        "--samples", "4", "--requests", "4", "--output-dir", str(tmp_path),
    )  # fmt: skip
    assert "Language server," in text and "| 2 |" in text
    result = json.loads((tmp_path / "latency.json").read_text())
    assert result["server"]["keystrokes"] > 5
    for row in result["dial"]:
        a, b = row["equal_length_tokens"]
        assert a == b  # the speedup compares equal completion lengths
    assert (tmp_path / "dial.png").read_bytes()[:4] == b"\x89PNG"
