"""`bench compare`: two benchmark runs compared site by site."""

import json

import pytest
from typer.testing import CliRunner

from celeris_complete.bench.compare import compare_files
from celeris_complete.cli import app
from celeris_complete.errors import CelerisError


def repo_run(path, answers, expected="x = 1"):
    rows = [
        {
            "file": "p/a.py",
            "line": i,
            "col": 4,
            "answer": a,
            "exact": a == expected,
            "similarity": 1.0 if a == expected else 0.5,
        }
        for i, a in enumerate(answers)
    ]
    path.write_text(json.dumps({"overall": {}, "packages": {"p": {"results": rows}}}))
    return path


def quality_run(path, completions, passed):
    rows = [
        {"task_id": f"T/{i}", "completion": c, "passed": p, "exact": p, "similarity": 0.9 if p else 0.1}
        for i, (c, p) in enumerate(zip(completions, passed))
    ]
    path.write_text(json.dumps({"set": "single", "results": rows}))
    return path


def test_counts_identical_answers_and_the_sites_right_in_one_run_only(tmp_path):
    a = repo_run(tmp_path / "a.json", ["x = 1", "y", "x = 1", "z"])
    b = repo_run(tmp_path / "b.json", ["x = 1", "x = 1", "w", "z"])
    report = compare_files(a, b)
    assert report["sites"] == 4
    assert report["identical_answers"] == 2
    assert [d["site"] for d in report["first_differences"]] == [["p/a.py", 1, 4], ["p/a.py", 2, 4]]
    assert (report["exact_only_a"], report["exact_only_b"]) == (1, 1)
    assert report["a"]["exact_match"] == 0.5 and report["edit_similarity_lift"] == 0.0


def test_humaneval_runs_compare_pass_at_1(tmp_path):
    a = quality_run(tmp_path / "a.json", ["a\n", "b\n", "c\n"], [True, False, False])
    b = quality_run(tmp_path / "b.json", ["a\n", "b\n", "d\n"], [True, False, True])
    report = compare_files(a, b)
    assert report["benchmark"] == "quality"
    assert report["identical_answers"] == 2
    assert (report["a"]["pass@1"], report["b"]["pass@1"]) == (
        pytest.approx(1 / 3, abs=1e-4),
        pytest.approx(2 / 3, abs=1e-4),
    )
    assert (report["passed_only_a"], report["passed_only_b"]) == (0, 1)


def test_refuses_runs_on_other_sites_or_of_other_benchmarks_or_summaries(tmp_path):
    a = repo_run(tmp_path / "a.json", ["x = 1", "y"])
    shorter = repo_run(tmp_path / "b.json", ["x = 1"])
    with pytest.raises(CelerisError, match="not on the same sites"):
        compare_files(a, shorter)
    humaneval = quality_run(tmp_path / "q.json", ["a\n", "b\n"], [True, False])
    with pytest.raises(CelerisError, match="bench repo"):
        compare_files(a, humaneval)
    summary = tmp_path / "s.json"
    summary.write_text(json.dumps({"overall": {}, "packages": {"p": {"exact_match": 0.3}}}))
    with pytest.raises(CelerisError, match="no per-site results"):
        compare_files(a, summary)
    (tmp_path / "bad.json").write_bytes(b"\xff\x00")
    with pytest.raises(CelerisError, match="not a benchmark run"):
        compare_files(a, tmp_path / "bad.json")


def test_the_command_fails_with_identical_only_when_an_answer_differs(tmp_path):
    a = repo_run(tmp_path / "a.json", ["x = 1", "y"])
    same = repo_run(tmp_path / "same.json", ["x = 1", "y"])
    other = repo_run(tmp_path / "other.json", ["x = 1", "q"])
    runner = CliRunner()
    result = runner.invoke(app, ["bench", "compare", str(a), str(same), "--identical"])
    assert result.exit_code == 0, result.output
    assert "identical answers: 2 of 2" in result.output
    result = runner.invoke(app, ["bench", "compare", str(a), str(other), "--identical"])
    assert result.exit_code == 1
    assert "identical answers: 1 of 2" in result.output
    result = runner.invoke(app, ["bench", "compare", str(a), str(tmp_path / "missing.json")])
    assert result.exit_code != 0 and "not a benchmark run" in result.output
