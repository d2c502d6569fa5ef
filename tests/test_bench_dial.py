import subprocess
import sys


def test_dial_runs_and_plots(tiny_model_dir, tmp_path):
    png = tmp_path / "dial.png"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "celeris_complete.cli",
            "bench",
            "dial",
            "--model",
            str(tiny_model_dir),
            "--steps",
            "1,2",
            "--samples",
            "4",
            "--requests",
            "2",
            "--plot",
            str(png),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "| 1 |" in r.stdout and "| 2 |" in r.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
