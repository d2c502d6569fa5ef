"""bench repo: site choice, scoring, the wheel cache, and one short run through the real server (no download)."""

from __future__ import annotations

import zipfile

import pytest
from lsprotocol import types

from celeris_complete.bench.repo import (
    MIN_REST,
    PACKAGES,
    cache_dir,
    choose_sites,
    cut_text,
    evaluate_folder,
    fetch_package,
    inserted_at_cursor,
    python_files,
    score,
    table,
)
from celeris_complete.errors import CelerisError
from celeris_complete.training.packages import PINNED

CLASS = '''\
class {name}:
    """A {word} with a name and a size."""

    def __init__(self, name, size):
        self.name = name
        self.size = size

    def area(self):
        return self.size * self.size * {n}

    def describe(self):
        return f"{{self.name}} has size {{self.size}}"

'''
MODULES = {
    "shapes.py": ["Circle", "Square", "Triangle", "Hexagon"],
    "animals.py": ["Horse", "Zebra", "Camel", "Llama"],
    "plants.py": ["Fern", "Maple", "Cactus", "Willow"],
    "tools.py": ["Hammer", "Wrench", "Chisel", "Spanner"],
}


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    root = tmp_path_factory.mktemp("pkgs") / "things"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for module, names in MODULES.items():
        text = "# generated for the tests\n\n" + "".join(
            CLASS.format(name=n, word=module[:-3], n=i + 2) for i, n in enumerate(names)
        )
        (root / module).write_text(text, encoding="utf-8")
    return root


def test_sites_are_deterministic_split_in_halves_and_expect_the_rest_of_the_line(package):
    files = python_files(package)
    sites = choose_sites(files, 12, max_files=4, seed=3)
    assert sites == choose_sites(files, 12, max_files=4, seed=3)
    assert sites != choose_sites(files, 12, max_files=4, seed=4)
    assert len(sites) == 12 and sum(s.kind == "indent" for s in sites) == 6
    # At most half of the package's five files are put under test, the sites spread over them.
    assert len({s.file for s in sites}) == 2
    for s in sites:
        line = files[s.file].split("\n")[s.line]
        indent = len(line) - len(line.lstrip())
        assert s.expected == line[s.col :].rstrip() and sum(not c.isspace() for c in s.expected) >= MIN_REST
        assert not line.lstrip().startswith("#")
        assert s.col == indent if s.kind == "indent" else s.col > indent
        cut = cut_text(files[s.file], s).split("\n")
        assert cut[s.line] == line[: s.col] and len(cut) == len(files[s.file].split("\n"))


def test_score_takes_the_first_line_and_strips_trailing_blanks():
    assert score("foo(bar)", "foo(bar)  \n    more()") == {"got": "foo(bar)", "exact": True, "similarity": 1.0,
                                                          "empty": False}  # fmt: skip
    kitten = score("sitting", "kitten")
    assert not kitten["exact"] and kitten["similarity"] == pytest.approx(1 - 3 / 7)
    assert score("x = 1", "\nx = 1")["empty"]
    # An item whose range starts before the cursor replaces what was typed: only the rest is new.
    item = types.InlineCompletionItem(
        insert_text="self.size", range=types.Range(types.Position(3, 8), types.Position(3, 13))
    )
    assert inserted_at_cursor(item, "        self.") == "size"
    assert inserted_at_cursor(types.InlineCompletionItem(insert_text="size"), "        self.") == "size"


def test_the_packages_are_not_in_the_training_corpus():
    assert not {name for name, _ in PACKAGES} & {name for name, _ in PINNED}


def test_wheels_are_cached_and_only_python_files_unpacked(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "celeris-complete" / "bench-repo"
    dist = cache_dir() / "dist"
    dist.mkdir(parents=True)
    with zipfile.ZipFile(dist / "demo_pkg-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("demo_pkg/__init__.py", "X = 1\n")
        zf.writestr("demo_pkg/sub/mod.py", "Y = 2\n")
        zf.writestr("demo_pkg/data.json", "{}")
        zf.writestr("demo_pkg-1.0.dist-info/METADATA", "Name: demo-pkg\n")
        zf.writestr("../escape.py", "no")
    src = fetch_package("demo-pkg", "1.0")  # in the cache: no download
    assert sorted(python_files(src)) == ["demo_pkg/__init__.py", "demo_pkg/sub/mod.py"]
    assert not list(cache_dir().rglob("escape.py"))
    # Not in the cache and no index to download from: a clear error, nothing unpacked.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(CelerisError, match=r"could not download nosuchpkg==0\.1"):
        fetch_package("nosuchpkg", "0.1")
    assert not (cache_dir() / "src" / "nosuchpkg-0.1").exists()


def test_short_run_through_the_real_server(package, shipped_model_dir):
    result = evaluate_folder(package, 6, max_files=4, seed=0, options={"model": str(shipped_model_dir)})
    under_test = result["files_under_test"]
    assert len(under_test) == 2 and result["sites"] == 6
    # While the server ran, the files under test were gone from its workspace and the rest were there.
    assert sorted(result["workspace_files"]) == sorted(set(python_files(package)) - set(under_test))
    assert result["indexed_files"] == 3  # what the server's index held: the other two modules and __init__.py
    assert all((package / f).is_file() for f in under_test)  # the package itself is left alone
    results = result["results"]
    assert {r["kind"] for r in results} == {"indent", "mid"}
    assert all(r["source"] == "model" and r["latency_ms"] > 0 for r in results)
    assert any(r["snippets"] for r in results)  # the workspace index took part ...
    assert not {s for r in results for s in r["snippets"]} & set(under_test)  # ... never with a file under test
    for r in results:
        assert r["exact"] == (r["got"] == r["expected"]) and r["empty"] == (r["got"] == "")
        assert r["answer"] is None or r["answer"].split("\n")[0].rstrip() == r["got"]
        # The server's account of it: the compiler's verdict (Python), and what the model wrote.
        assert r["syntax"] in {"ok", "elsewhere", "reindented", "shortened", "closed", "replaced", "withheld", "kept"}
        assert isinstance(r["raw"], str) and (r["answer"] is None or r["raw"])
    assert result["exact_match"] == pytest.approx(sum(r["exact"] for r in results) / 6, abs=1e-4)
    assert 0 <= result["edit_similarity"] <= 1 and result["by_kind"]["indent"]["sites"] == 3
    assert result["latency_ms_p50"] > 0


def test_invoked_requests_keep_every_item_offered(package, shipped_model_dir):
    result = evaluate_folder(package, 6, max_files=4, seed=0, options={"model": str(shipped_model_dir)}, invoked=True)
    results = result["results"]
    for r in results:
        assert r["offered"][:1] == ([r["got"]] if r["answer"] is not None else [])  # the first item is the answer
        assert len(r["offered"]) <= 3 and r["exact_offered"] == (r["expected"] in r["offered"])
    assert any(len(r["offered"]) > 1 for r in results)  # alternatives came with the answers
    assert result["exact_offered"] >= result["exact_match"]
    assert result["exact_offered"] == pytest.approx(sum(r["exact_offered"] for r in results) / 6, abs=1e-4)
    assert "one item exact" in table({"packages": {}, "overall": result})
