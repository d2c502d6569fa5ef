import json
import subprocess
import sys

from celeris_complete.bench.engine import table


def test_engine_bench_runs_each_config_in_its_own_process(tiny_model_dir, tmp_path, small_corpus):
    out = tmp_path / "bench.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "celeris_complete.cli",
            "bench",
            "engine",
            "--model",
            str(tiny_model_dir),
            "--configs",
            "torch:none,torch:int8",
            "--requests",
            "3",
            "--samples",
            "0",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())
    assert [row["config"] for row in rows] == ["torch:none", "torch:int8"]
    for row in rows:
        assert "error" not in row, row
        assert row["keystroke_ms"]["n"] == 12 and row["peak_rss_mb"] > 0
    assert "| torch:int8 |" in r.stdout


def test_table_reports_errors():
    assert "error" in table([{"config": "onnx:none", "error": ["no onnxruntime"]}])
