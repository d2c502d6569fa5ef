"""The parsers' check of answers outside Python (checks/grammar.py): what it blames, what it repairs, what
it leaves alone, and that it stays bounded."""

from __future__ import annotations

import pytest

from celeris_complete.checks import grammar
from celeris_complete.checks.grammar import grammar_window
from celeris_complete.checks.languages import resolve
from celeris_complete.checks.syntax import check, judge
from celeris_complete.checks.window import BLAMED, ELSEWHERE, OK

# A loop body to fill in each language (the cursor at @@, on an empty line), a right line and the
# issue's wrong ones.
HOLES = {
    "typescript": "export function sum(xs: number[]): number {\n  let total = 0;\n  for (const x of xs) {\n"
                  "    @@\n  }\n  return total;\n}\n",
    "javascript": "function sum(xs) {\n  let total = 0;\n  for (const x of xs) {\n    @@\n  }\n"
                  "  return total;\n}\n",
    "go": "package x\n\nfunc sum(xs []int) int {\n\ttotal := 0\n\tfor _, x := range xs {\n\t\t@@\n\t}\n"
          "\treturn total\n}\n",
    "rust": "fn sum(xs: &[i32]) -> i32 {\n    let mut total = 0;\n    for x in xs {\n        @@\n    }\n"
            "    total\n}\n",
    "java": "class A {\n  int sum(int[] xs) {\n    int total = 0;\n    for (int x : xs) {\n      @@\n    }\n"
            "    return total;\n  }\n}\n",
    "c": "int sum(int *xs, int n) {\n  int total = 0;\n  for (int i = 0; i < n; i++) {\n    @@\n  }\n"
         "  return total;\n}\n",
}  # fmt: skip
RIGHT = {"typescript": "total += x;", "javascript": "total += x;", "go": "total += x", "rust": "total += x;",
         "java": "total += x;", "c": "total += xs[i];"}  # fmt: skip
WRONG = ("xs x", "import errno", '"""', "elif x:")


def around(language: str, doc: str | None = None) -> tuple[str, str]:
    prefix, suffix = (doc or HOLES[language]).split("@@")
    return prefix, suffix


@pytest.mark.parametrize("language", sorted(HOLES))
def test_a_clean_window_blames_the_issues_answers_and_passes_a_right_one(language):
    prefix, suffix = around(language)
    win = grammar_window(prefix, suffix, resolve(language))
    assert win is not None and win.clean and win.strict
    assert judge(win, RIGHT[language]) == OK
    for wrong in WRONG:
        assert judge(win, wrong) == BLAMED, wrong


def test_an_error_elsewhere_is_not_the_answers_but_one_in_its_own_lines_is():
    # A declaration left open above the cursor's: the window starts at the cursor's own declaration.
    above = "function broken( {\n\n"
    prefix, suffix = around("typescript", above + HOLES["typescript"])
    win = grammar_window(prefix, suffix, resolve("typescript"))
    assert win.before.startswith("export function sum") and win.clean
    # Broken inside the cursor's declaration: not clean, and the blame is only for the answer's own lines.
    doc = HOLES["typescript"].replace("  let total = 0;\n", "  let y = (1;\n  let total = 0;\n")
    prefix, suffix = around("typescript", doc)
    win = grammar_window(prefix, suffix, resolve("typescript"))
    assert not win.clean and not win.strict
    assert judge(win, "total += x;") == OK  # adds no error of its own
    assert judge(win, "xs x") == BLAMED  # the error is in its own line
    assert check("total += x;", prefix, suffix, win=win)[1] == OK


def test_a_line_being_typed_is_judged_strictly():
    doc = "export function sum(xs: number[]): number {\n  let total = @@\n  return total;\n}\n"
    prefix, suffix = doc.split("@@")
    win = grammar_window(prefix, suffix, resolve("typescript"))
    assert not win.clean and win.strict  # only the line being typed is unfinished
    assert judge(win, "xs.length;") == OK
    assert judge(win, "xs x") == BLAMED


def test_repairs_finish_a_line_with_the_languages_own_terminator():
    ts_prefix, ts_suffix = "function f(a: number) {\n  const y = g(a", "\n  return y;\n}\n"
    ts = grammar_window(ts_prefix, ts_suffix, resolve("typescript"))
    assert ts.strict and check(", 2", ts_prefix, ts_suffix, win=ts)[:2] == (", 2)", "closed")  # (no `;` needed)
    c_prefix, c_suffix = "int f(int a) {\n  int y = g(a", "\n  return y;\n}\n"
    c = grammar_window(c_prefix, c_suffix, resolve("c"))
    assert check(", 2", c_prefix, c_suffix, win=c)[:2] == (", 2);", "closed")
    go_prefix, go_suffix = "package x\n\nfunc f(a int) int {\n\ty := g(a", "\n\treturn y\n}\n"
    go = grammar_window(go_prefix, go_suffix, resolve("go"))
    assert check(", 2", go_prefix, go_suffix, win=go)[:2] == (", 2)", "closed")  # no semicolon in Go
    # A blamed answer at an empty line with nothing to repair it and no samples: withheld.
    prefix, suffix = around("go")
    assert check("import errno", prefix, suffix, win=grammar_window(prefix, suffix, resolve("go")))[:2] == (
        "",
        "withheld",
    )


def test_a_huge_document_is_parsed_only_around_the_cursor():
    body = "".join(f"export function f{i}(a: number): number {{\n  return a + {i};\n}}\n\n" for i in range(4000))
    prefix = body + "export function g(xs: number[]): number {\n  let total = 0;\n  "
    suffix = "\n  return total;\n}\n" + body
    assert len(prefix) > 200_000
    win = grammar_window(prefix, suffix, resolve("typescript"))
    assert win.before.startswith("export function g") and len(win.after) < 100
    assert judge(win, "total += xs[0];") == OK and judge(win, "xs x") == BLAMED
    # With no declaration to start at, the window is bounded by characters.
    flat = "let a = 1;\n" * 30_000
    win = grammar_window("function f() {\n" + flat, flat + "}\n", resolve("typescript"))
    assert len(win.before) <= grammar.WINDOW_CHARS and len(win.after) <= grammar.WINDOW_CHARS


def test_a_parse_over_its_time_is_given_up_and_nothing_is_judged(monkeypatch):
    monkeypatch.setattr(grammar, "PARSE_SECONDS", -1.0)
    prefix, suffix = around("typescript", "function f() {\n" + "  let a = 1;\n" * 2000 + "  @@\n}\n")
    assert grammar_window(prefix, suffix, resolve("typescript")) is None
    monkeypatch.setattr(grammar, "PARSE_SECONDS", 10.0)
    assert grammar_window(prefix, suffix, resolve("typescript")) is not None
    # The parser given up on starts afresh (tree-sitter would resume the abandoned parse on the next call).
    monkeypatch.setattr(grammar, "PARSE_SECONDS", -1.0)
    assert grammar_window(prefix, suffix, resolve("typescript")) is None
    monkeypatch.setattr(grammar, "PARSE_SECONDS", 10.0)
    small = grammar_window(*around("typescript"), resolve("typescript"))
    assert small.clean and judge(small, RIGHT["typescript"]) == OK
    # A judgement given up on: blamed where the window is clean (error recovery is what takes long).
    body = "".join(f"  let a{i} = {i};\n" for i in range(300))
    big = grammar_window("function f() {\n" + body + "  ", "\n" + body + "}\n", resolve("typescript"))
    assert big.clean and judge(big, "let b = 2;") == OK
    monkeypatch.setattr(grammar, "PARSE_SECONDS", -1.0)
    assert big.error_line("let c = 3;") == -1 and judge(big, "let c = 3;") == BLAMED


def test_a_grammar_that_does_not_load_leaves_its_language_unchecked(monkeypatch):
    grammar.load.cache_clear()
    monkeypatch.setitem(grammar.GRAMMARS, "go", ("tree_sitter_no_such_grammar", "language"))
    try:
        assert grammar.load("go") is None and not grammar.available(resolve("go"))
        prefix, suffix = around("go")
        assert grammar_window(prefix, suffix, resolve("go")) is None
        assert "go" not in grammar.grammars() and "rust" in grammar.grammars()
    finally:
        grammar.load.cache_clear()


def test_tsx_files_take_the_tsx_grammar():
    ts = resolve("typescriptreact")
    assert grammar.dialect(ts, "typescriptreact") == "tsx" and grammar.dialect(ts, "file:///a/b.tsx") == "tsx"
    assert grammar.dialect(ts, "typescript") == "typescript"
    prefix, suffix = "export function A() {\n  return <div>", "</div>;\n}\n"
    win = grammar_window(prefix, suffix, ts, "typescriptreact")
    assert win.clean and judge(win, "hello") == OK


def test_non_utf8_text_and_lone_surrogates_do_not_crash():
    prefix, suffix = around("typescript")
    win = grammar_window(prefix + "\ud800", suffix, resolve("typescript"))
    assert judge(win, "total += x; // \udcff") in (OK, BLAMED, ELSEWHERE)


def test_the_engine_judges_answers_outside_python_with_the_parser(shipped_model_dir, monkeypatch):
    from celeris_complete.config import load_settings
    from celeris_complete.engine import Engine, InfillRequest, decode

    engine = Engine(load_settings(dict(model=str(shipped_model_dir), threads=1)))
    monkeypatch.setattr(decode, "postprocess", lambda *_: "xs x")  # what the model wrote
    prefix, suffix = around("go")
    done = engine.complete(InfillRequest(prefix, suffix, language="go", repair_samples=False))
    assert (done.text, done.syntax) == ("", "withheld")  # a clean window: an answer that breaks it is not shown
    monkeypatch.setattr(decode, "postprocess", lambda *_: "total += x")
    done = engine.complete(InfillRequest(prefix, suffix, language="go", repair_samples=False))
    assert (done.text, done.syntax) == ("total += x", "ok")
    # syntax_candidates 0 turns the check off; an unknown language is not judged.
    monkeypatch.setattr(decode, "postprocess", lambda *_: "xs x")
    engine.use_settings(load_settings(dict(model=str(shipped_model_dir), threads=1, syntax_candidates=0)))
    assert engine.complete(InfillRequest(prefix, suffix, language="go")).text == "xs x"
    engine.use_settings(load_settings(dict(model=str(shipped_model_dir), threads=1)))
    assert engine.complete(InfillRequest(prefix, suffix, language="plaintext")).syntax == ""  # not known: unchecked
    # Markdown has no parser and the model writes code: only a draft it accepted whole would be shown.
    done = engine.complete(InfillRequest(prefix, suffix, language="markdown"))
    assert (done.text, done.syntax) == ("", "drafts-only")
    # A minified line: nothing, and no model call.
    long_line = "var a=" + ",".join(str(i) for i in range(400)) + ";"
    done = engine.complete(InfillRequest(long_line[:900], long_line[900:] + "\n", language="javascript"))
    assert (done.text, done.syntax, done.steps) == ("", "minified", 0)
    assert set(done.timings_ms) >= {"context_encode", "refine", "total"}  # what infill and the server report


def test_answers_completed_whole_are_judged_in_the_named_language():
    """A remote server's or a batched row's answer (engine/checking.py check_whole): no samples to draw."""
    from celeris_complete.engine.checking import check_whole

    prefix, suffix = around("go")
    assert check_whole("xs x", prefix, suffix, "go", 4) == ("", "withheld")
    assert check_whole("total += x", prefix, suffix, "a/b.go", 4) == ("total += x", "ok")
    assert check_whole("xs x", prefix, suffix, None, 4) == ("xs x", "")  # no language named: as it is
    assert check_whole("xs x", prefix, suffix, "plaintext", 4) == ("xs x", "")  # a language not known here
    assert check_whole("xs x", prefix, suffix, "markdown", 4) == ("", "drafts-only")
    assert check_whole("xs x", prefix, suffix, "go", 0) == ("xs x", "")  # the check turned off
    assert check_whole("self.total = 1", prefix, suffix, "go", 0) == ("", "foreign")  # the guard stays
    assert check_whole("y = (1", "def f():\n    ", "\n", "python", 4) == ("y = (1)", "closed")
