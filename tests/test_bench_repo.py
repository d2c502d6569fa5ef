"""bench repo: site choice, scoring, the wheel cache, and one short run through the real server (no download)."""

from __future__ import annotations

import shutil
import subprocess
import zipfile

import pytest
from lsprotocol import types

from celeris_complete.bench.repo import (
    MIN_REST,
    PACKAGES,
    Site,
    choose_sites,
    cut_text,
    evaluate_folder,
    inserted_at_cursor,
    score,
    site_context,
    table,
)
from celeris_complete.bench.repo_languages import cache_dir, fetch_package, python_files
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


TS_CLASS = """// A {name}: generated for the tests.
/* a block comment
 * over two lines */
export class {name} {{
  constructor(public name: string, public size: number) {{}}

  area(): number {{
    return this.size * this.size * {n};
  }}

  describe(): string {{
    return `${{this.name}} has size ${{this.size}}`;
  }}
}}

"""


def test_other_languages_skip_their_comment_lines():
    from celeris_complete.bench.repo import cursor_columns
    from celeris_complete.bench.repo_languages import C_LIKE

    for comment in ("// a comment line", "  /* opens a comment", "   * inside one */"):
        assert cursor_columns(comment, C_LIKE) == (None, [])
    assert cursor_columns("  # a private field?", C_LIKE)[0] == 2  # not a comment in TypeScript
    assert cursor_columns("# a comment", ("#",)) == (None, [])
    start, mids = cursor_columns("  const total = first + second;", C_LIKE)
    assert start == 2 and mids


def test_npm_tarballs_give_their_sources_and_nothing_built_from_them(tmp_path):
    """What a tarball ships beside the sources (compiled dist/, declarations, source maps holding the
    source, minified files) would hand the answer to drafts and snippets: never unpacked."""
    import io
    import tarfile

    from celeris_complete.bench.repo_languages import BenchPackage
    from celeris_complete.training.registries import fetch_npm

    members = {"package/src/a.ts": "export const a = 1;\n", "package/src/b/c.ts": "export const c = 2;\n",
               "package/src/a.d.ts": "export declare const a: number;\n", "package/dist/a.ts": "x\n",
               "package/src/a.js.map": '{"sourcesContent": ["export const a = 1;"]}',
               "package/lib/other.ts": "not included\n", "package/package.json": "{}"}  # fmt: skip
    cache = tmp_path / "cache"
    (cache / "dist").mkdir(parents=True)
    with tarfile.open(cache / "dist" / "scope-demo-1.0.0.tgz", "w:gz") as tar:  # as `npm pack` names it
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    package = BenchPackage("@scope/demo", "1.0.0", "MIT", ("src/*",))
    root = fetch_npm(cache, package, (".ts",))  # the tarball is in the cache: no download
    got = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != ".unpacked")
    assert got == ["src/a.ts", "src/b/c.ts"]


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="Debian's dpkg-deb builds and unpacks the archive")
def test_debian_packages_give_the_sources_under_their_folder_and_not_their_tests(tmp_path):
    """A Go package's archive (as ``golang-*-dev`` ships it): only the sources under the package's folder,
    never its ``_test.go`` files, other folders or other suffixes; a cached archive is not downloaded."""
    from celeris_complete.bench.repo_languages import BenchPackage
    from celeris_complete.training.registries import fetch_debian

    tree = tmp_path / "tree"
    folder = tree / "usr/share/gocode/src/github.com/demo/pkg"
    files = {folder / "a.go": "package pkg\n", folder / "sub/b.go": "package sub\n",
             folder / "a_test.go": "package pkg\n", folder / "README.md": "# demo\n",
             tree / "usr/share/gocode/src/github.com/other/c.go": "package other\n",
             tree / "usr/share/doc/golang-demo-dev/copyright": "MIT\n"}  # fmt: skip
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tree / "DEBIAN").mkdir()
    (tree / "DEBIAN" / "control").write_text(
        "Package: golang-demo-dev\nVersion: 1:1.0-2\nArchitecture: all\nMaintainer: nobody <n@example.org>\n"
        "Description: demo\n"
    )
    cache = tmp_path / "cache"
    (cache / "dist").mkdir(parents=True)
    deb = cache / "dist" / "golang-demo-dev_1%3a1.0-2_all.deb"  # as `apt-get download` names it
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True, capture_output=True)
    package = BenchPackage("golang-demo-dev", "1:1.0-2", "MIT", ("*",), "usr/share/gocode/src/github.com/demo/pkg")
    root = fetch_debian(cache, package, (".go",))
    got = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != ".unpacked")
    assert got == ["a.go", "sub/b.go"]


def test_a_typescript_package_through_the_real_server(tmp_path, shipped_model_dir):
    from celeris_complete.checks.grammar import grammar_window
    from celeris_complete.checks.languages import foreign, resolve
    from celeris_complete.checks.syntax import judge
    from celeris_complete.checks.window import BLAMED
    from celeris_complete.engine.confidence import VERDICTS

    root = tmp_path / "things"
    (root / "src").mkdir(parents=True)
    for module, names in MODULES.items():
        text = "".join(TS_CLASS.format(name=n, n=i + 2) for i, n in enumerate(names))
        (root / "src" / module.replace(".py", ".ts")).write_text(text, encoding="utf-8")
    options = {"model": str(shipped_model_dir), "budget_ms": 60000, "min_confidence": 0.0}  # (every answer shown)
    result = evaluate_folder(root, 6, max_files=4, seed=0, options=options, language="typescript")
    assert result["sites"] == 6 and all(f.endswith(".ts") for f in result["files_under_test"])
    results = result["results"]
    assert not any(r["expected"].lstrip().startswith(("//", "/*", "*")) for r in results)  # no comment sites
    # The server was told the language: TypeScript's parser judged the answers (checks/grammar.py), none
    # shown that it blames where the code around the cursor parsed cleanly, and none shown with a form
    # only Python has (checks/languages.py: the model writes triple quotes under a method's first line).
    assert all(r["source"] == "model" and r["syntax"] in (*VERDICTS, "foreign") for r in results), results
    assert sum(r["syntax"] not in ("", "foreign") for r in results) >= 4
    ts = resolve("typescript")
    for r in results:
        text = (root / r["file"]).read_text()
        prefix, suffix = site_context(text, Site(r["file"], r["line"], r["col"], r["kind"], r["expected"]))
        assert not (r["answer"] and foreign(ts, prefix[prefix.rfind("\n") + 1 :], r["answer"])), r
        win = grammar_window(prefix, suffix, ts)
        assert not (r["answer"] and win.clean and judge(win, r["answer"]) == BLAMED), r
