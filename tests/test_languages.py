"""The languages a document can be in (checks/languages.py) and the guard that keeps Python out of the
others: the issue's examples are caught, each language's own forms are not."""

import pytest

from celeris_complete.checks.languages import foreign, resolve
from celeris_complete.engine.checking import keep_python_out


def test_a_language_from_an_id_a_filetype_a_name_or_a_uri():
    assert resolve("typescriptreact").name == "typescript" and resolve("shellscript").name == "shell"
    assert resolve("file:///w/src/App.TSX").name == "typescript" and resolve("main.go").family == "go"
    assert resolve("python").family == "python" and resolve("a.h").name == "c"
    assert resolve("notes.txt") is None and resolve("") is None and resolve(None) is None


@pytest.mark.parametrize(
    ("language", "before", "text"),
    [("typescript", "", "import errno"), ("go", "    ", "import os"), ("typescript", "  ", '"""'),
     ("go", "", "def f(x):"), ("typescript", "if (x) ", "return None;"), ("typescript", "", "if x:"),
     ("rust", "    ", "elif x > 1:"), ("javascript", "", "from os import path"), ("c", "x = ", "True;"),
     ("java", "", "except ValueError:"), ("go", "", "x := self.y")],
)  # fmt: skip
def test_python_forms_are_foreign_elsewhere(language, before, text):
    assert foreign(resolve(language), before, text)
    assert not foreign(resolve("python"), before, text)  # Python's own, of course


@pytest.mark.parametrize(
    ("language", "before", "text"),
    [("go", "import ", '"fmt"'), ("typescript", "    ", "xs x"), ("rust", "let x = ", "None;"),
     ("rust", "", "self.x += 1;"), ("java", "String s = ", '"""'), ("shellscript", "", "elif [ -f x ]; then"),
     ("lua", "", "self.x = 1"), ("typescript", "", "// True if it works"), ("typescript", "const s = ", '"True";'),
     ("go", "", "for i := range xs {"), ("java", "", "import java.util.List"), ("typescript", "x = ", "y ? a : b;"),
     ("c", "", "case 1:")],
)  # fmt: skip
def test_each_languages_own_forms_are_not(language, before, text):
    assert not foreign(resolve(language), before, text)


def test_an_answer_is_cut_before_its_first_python_line_or_withheld():
    ts = resolve("typescript")
    text, verdict, others, drafted = keep_python_out(
        ts, "class A {\n  describe(): ", "string {\n    \"\"\"\n    doc", ("None", "string"), ["\"\"\"", "x"]
    )
    assert (text, verdict) == ("string {", "shortened")
    assert others == ("string",) and drafted == ["x"]
    assert keep_python_out(ts, "  ", "self.size = 1;", (), [])[:2] == ("", "foreign")
    assert keep_python_out(ts, "  ", "this.size = 1;", (), [])[:2] == ("this.size = 1;", "")


def test_a_files_family_by_its_name_path_or_uri():
    from celeris_complete.checks.languages import family_of

    assert family_of("pkg/a.py") == "python" and family_of("file:///w/b.tsx") == "js" and family_of("c.mjs") == "js"
    assert family_of("x/y.go") == "go" and family_of("conf/d.TOML") == ".toml"
    assert family_of("Makefile") is None and family_of(None) is None and family_of("client:abc") is None
