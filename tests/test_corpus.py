import json
from pathlib import Path

import pytest

from celeris_complete.errors import CelerisError
from celeris_complete.training.corpus import CorpusFile, gather, looks_generated, validation_split, write_manifest


def test_generated_tables_are_filtered():
    rows = "".join(f"    '\\x{i:02x}'     #  0x{i:02X} -> LATIN SMALL LETTER\n" for i in range(200))
    table = "decoding_table = (\n" + rows + ")\n"
    assert looks_generated(table)
    assert looks_generated("x = '" + "a" * 1000 + "'\n") == "very long lines"
    code = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(50))
    assert looks_generated(code) is None


def test_gather_dedupes_excludes_and_skips_bad_files(tmp_path):
    (tmp_path / "a.py").write_text("def a():\n    return 1\n")
    (tmp_path / "copy_of_a.py").write_text("def a():\n    return 1\n")
    (tmp_path / "latin1.py").write_bytes("s = 'caf\xe9'\n".encode("latin-1"))
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "notes.txt").write_text("not python")
    (tmp_path / "skipme").mkdir()
    (tmp_path / "skipme" / "b.py").write_text("def b():\n    return 2\n")
    files = gather([tmp_path], excludes=("*/skipme/*",))
    assert [f.relpath for f in files] == [f"{tmp_path.name}/a.py"]


def test_empty_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(CelerisError, match="corpus is empty"):
        gather([tmp_path])
    with pytest.raises(CelerisError, match="not found"):
        gather([tmp_path / "missing"])


def test_manifest_lists_every_file(small_corpus, tmp_path):
    files = gather([small_corpus])
    write_manifest(files, tmp_path / "m.json", every=2)
    rows = json.loads((tmp_path / "m.json").read_text())["files"]
    assert [r["sha256"] for r in rows] == [f.sha256 for f in files]
    assert all(r["bytes"] > 0 and r["split"] in ("train", "validation") for r in rows)


def test_a_small_corpus_holds_out_enough_text_even_when_a_tiny_file_comes_first():
    # A repository of five modules and one two-line script that sorts first by hash: the script alone
    # is far too little to validate on (it once was the whole held-out split and training refused).
    def f(sha: str, chars: int) -> CorpusFile:
        return CorpusFile(Path(sha), sha, sha * 8, "x" * chars)

    files = [f("0001", 30), f("1111", 19_000), f("2222", 13_000), f("3333", 6_000), f("4444", 8_000), f("5555", 3_000)]
    held = validation_split(files, every=10_000, min_chars=2_720)
    held_chars = sum(len(x.text) for x in files if x.sha256 in held)
    assert held_chars >= 2_720 and len(held) < len(files)
    assert sum(len(x.text) for x in files) - held_chars >= 2_720  # the training side keeps enough too
    # Too little text for both sides: still one file on each side, never all of them held out.
    two = [f("0001", 100), f("1111", 100)]
    assert len(validation_split(two, every=10_000, min_chars=2_720)) == 1
