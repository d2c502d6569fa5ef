"""The benchmarks of the parts (`bench checks`, `drafts`, `footprint`, `train-speed`, `shapes`): each
measures what it says on small inputs, and refuses bad options with a clear message."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from celeris_complete.bench import checks, drafts, footprint, shapes, train_speed
from celeris_complete.cli import app
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine
from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import load_model_dir

MODULE = '''"""A module."""

import os


def first(values, default=None):
    for value in values:
        return value
    return default


class Box:
    def __init__(self, items):
        self.items = list(items)

    def size(self):
        return len(self.items) + {0}
'''


def test_the_checks_blame_no_right_line_and_every_broken_one_outside_strings(tmp_path):
    for i in range(4):
        (tmp_path / f"m{i}.py").write_text(MODULE.replace("{0}", str(i)))
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "bad.py").write_text("def broken(:\n    pass\n" * 5)  # tests are left out
    got = checks.precision([tmp_path], files=10, lines=50, seed=1)
    assert got["lines_judged"] >= 40 and got["right_lines_blamed"] == 0 and got["blamed"] == []
    assert got["broken_lines_let_through"] == 0  # no line of these lies inside a string
    assert got["ms_per_judgement"] > 0


def test_the_share_of_sites_whose_line_is_the_first_draft():
    body = "\n".join(f"    result_{i} = combine(left_{i}, right_{i}, weight={i})" for i in range(40))
    twins = {f"pkg/m{k}.py": f"def build():\n{body}\n    return result_1\n" for k in range(6)}
    counts = drafts.right_drafts(twins, sites=20, seed=0)  # every line's twin is in the workspace
    assert counts["sites"] == 20 and counts[(1,)] == 20 and counts[(1, "mid")] == 10
    alone = {f"pkg/m{k}.py": body.replace("result_", f"value{k}_") + "\n" for k in range(6)}
    counts = drafts.right_drafts(alone, sites=20, seed=0)
    assert counts["sites"] == 20 and counts[(5,)] == 0
    times = drafts.search_times(body, twins, calls=10)
    assert [t["calls"] for t in times.values()] == [10, 10, 5, 5] and all(t["max_ms"] >= 0 for t in times.values())


def test_the_index_comes_and_goes_and_the_engines_memory_is_sampled(tmp_path, tiny_model_dir):
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(MODULE.replace("{0}", str(i)) * 10)
    got = footprint.index_memory(tmp_path, files=5, cycles=2)
    assert [c["files"] for c in got["cycles"]] == [got["start_files"] + 5] * 2
    assert [c["files_after_removal"] for c in got["cycles"]] == [got["start_files"]] * 2
    assert all(c["given_back_rss_mb"] > 0 and c["query_ms"] >= 0 for c in got["cycles"])
    engine = Engine(load_settings({"model": str(tiny_model_dir)}, environ={}, user_file=tmp_path / "none"))
    mem = footprint.engine_memory(engine, places=4, every=2)
    assert [r["completions"] for r in mem["rows"]] == [0, 6, 12] and mem["rows"][-1]["rss_mb"] > 0


def test_the_language_server_with_a_large_document(tmp_path, tiny_model_dir):
    got = footprint.huge_document(tmp_path, footprint.huge_text(3000), rounds=2, options={"model": str(tiny_model_dir)})
    assert got["open_ms"] > 0 and len(got["requests_ms"]) == 2 and len(got["changes_ms"]) == 2
    assert got["items"] and all(n >= 0 for n in got["items"])


def test_training_throughput_of_a_small_model(small_tok):
    rows = train_speed.run(small_tok, ["eager:fp32"], d_model=32, n_layers=1, n_heads=2, steps=2, batch=2, context=32)
    assert len(rows) == 1 and rows[0]["config"] == "eager:fp32" and rows[0]["tokens_per_s"] > 0


def test_a_shape_is_measured_by_selftest_on_random_weights(tiny_model_dir):
    rows = shapes.run(tiny_model_dir, ["48x1x2", "96x2x4"], requests=1)
    assert [r["shape"] for r in rows] == ["48x1x2", "96x2x4"] and all(r["keystroke_p50_ms"] > 0 for r in rows)
    assert rows[1]["params_M"] > rows[0]["params_M"] > load_model_dir(tiny_model_dir).model.num_parameters() / 1e6
    with pytest.raises(CelerisError, match="D_MODELxLAYERSxHEADS"):
        shapes.parse_shape("wide")


@pytest.mark.parametrize(
    "args, message",
    [
        (["checks", "/no/such/folder"], "not a folder"),
        (["checks", "--files", "0"], "at least 1"),
        (["drafts", "--seeds", "a,b"], "give numbers"),
        (["footprint", "--what", "disk"], "choose from engine, index, idle, huge"),
        (["train-speed", "--configs", "fast:fp8"], "give MODE:PRECISION"),
        (["shapes", "65x2x2"], "heads of an even size"),
    ],
)
def test_bad_options_get_a_clear_message(args, message):
    result = CliRunner().invoke(app, ["bench", *args])
    assert result.exit_code == 2 and message in result.output
