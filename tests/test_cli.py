import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


def cli(*args, stdin=None, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "celeris_complete.cli", *map(str, args)],
        input=stdin,
        capture_output=True,
        cwd=cwd or REPO,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "a.py"
    p.write_text("def add(a, b):\n    return <FILL>\n\n\ndef sub(a, b):\n    return <FILL>\n")
    return p


def test_markers_to_stdout(tiny_model_dir, src):
    r = cli("infill", src, "--model", tiny_model_dir)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "<FILL>" not in out and out.startswith("def add(a, b):\n    return ")
    assert b"hole 2:" in r.stderr
    assert src.read_text().count("<FILL>") == 2, "the file is untouched without --in-place"


def test_in_place_keeps_a_backup(tiny_model_dir, src):
    original = src.read_bytes()
    r = cli("infill", src, "--model", tiny_model_dir, "--in-place")
    assert r.returncode == 0, r.stderr
    assert (src.parent / "a.py~").read_bytes() == original
    assert "<FILL>" not in src.read_text()


def test_in_place_keeps_permissions_and_crlf(tiny_model_dir, tmp_path):
    src = tmp_path / "w.py"
    src.write_bytes(b"def add(a, b):\r\n    return <FILL>\r\n")
    src.chmod(0o640)
    r = cli("infill", src, "--model", tiny_model_dir, "--in-place")
    assert r.returncode == 0, r.stderr
    data = src.read_bytes()
    assert b"<FILL>" not in data and data.count(b"\r\n") == data.count(b"\n") >= 2
    assert src.stat().st_mode & 0o777 == 0o640 and (tmp_path / "w.py~").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.py", "w.py~"]  # no temporary file left


def test_position_and_json(tiny_model_dir, src):
    r = cli("infill", f"{src}:2:12", "--model", tiny_model_dir, "--json", "--mode", "line")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["mode"] == "line" and "\n" not in data["completion"]
    assert data["confidence"] is None  # the tiny model ships no calibration (confidence.json)
    assert set(data["timings_ms"]) >= {"tokenize", "context_encode", "refine", "detokenize", "postprocess", "total"}
    r2 = cli("infill", src, "--line", "2", "--col", "12", "--model", tiny_model_dir, "--json", "--mode", "line")
    assert json.loads(r2.stdout)["completion"] == data["completion"], "greedy decoding is deterministic"


def test_stdin(tiny_model_dir):
    r = cli("infill", "-", "--model", tiny_model_dir, stdin=b"x = <FILL>\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().startswith("x = ")


def test_crlf_is_kept(tiny_model_dir, tmp_path):
    p = tmp_path / "crlf.py"
    p.write_bytes(b"def f():\r\n    <FILL>\r\n")
    r = cli("infill", p, "--model", tiny_model_dir, "--mode", "block")
    assert r.returncode == 0, r.stderr
    assert b"\n" not in r.stdout.replace(b"\r\n", b"")


@pytest.mark.parametrize(
    "content, args, message",
    [
        (b"\x7fELF\x00\x00binary", ["1:1"], b"binary"),
        (b"caf\xe9 = 1\n", ["1:1"], b"not valid UTF-8"),
        (b"x = 1\n", ["9:1"], b"line 9 is out of range"),
        (b"x = 1\n", ["1:99"], b"column 99 is out of range"),
        (b"x = 1\n", [], b"no <FILL> marker"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, content, args, message):
    """Reported before the model loads: with a model directory that does not exist, the input's mistake
    is what the user is told (broken once: the model loaded first -> "model directory not found")."""
    p = tmp_path / "f.py"
    p.write_bytes(content)
    target = f"{p}:{args[0]}" if args else p
    r = cli("infill", target, "--model", tmp_path / "no-model")
    assert r.returncode == 2
    assert message in r.stderr and b"Traceback" not in r.stderr, r.stderr


def test_missing_model_is_a_clear_error(tmp_path, src):
    r = cli("infill", src, "--model", tmp_path / "none")
    assert r.returncode == 2 and b"model directory not found" in r.stderr and b"Traceback" not in r.stderr


def test_bad_setting_names_its_source(tiny_model_dir, src, tmp_path):
    (tmp_path / ".celeris-complete.toml").write_text("steps = -1\n")
    r = cli("infill", src, "--model", tiny_model_dir, cwd=tmp_path)
    assert r.returncode == 2 and b".celeris-complete.toml: setting 'steps' must be >= 1" in r.stderr


def test_fifty_megabyte_file_is_windowed(tiny_model_dir, tmp_path):
    p = tmp_path / "big.py"
    line = "value = compute(alpha, beta) + offset  # a line of a very large generated file\n"
    with p.open("w") as fh:
        for _ in range(50 * 1024 * 1024 // len(line)):
            fh.write(line)
        fh.write("result = <FILL>\n")
        for _ in range(1000):
            fh.write(line)
    r = cli("infill", p, "--model", tiny_model_dir, "--json")
    assert r.returncode == 0, r.stderr
    hole = json.loads(r.stdout)["holes"][0]
    assert hole["timings_ms"]["tokenize"] < 1000  # the context is cut before tokenizing
