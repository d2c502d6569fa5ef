"""The compiler's verdict on Python answers: the window around the cursor, blame, and the repairs."""

import gzip
import json
import warnings

import pytest

from celeris_complete.bench.quality import DATA_DIR, SETS
from celeris_complete.checks.brackets import closed, still_open
from celeris_complete.checks.names import MAX_DOCUMENT
from celeris_complete.checks.syntax import (
    BLAMED,
    ELSEWHERE,
    check,
    fits,
    header_drafts,
    is_python,
    judge,
    reindentations,
    repair,
    shortened,
)
from celeris_complete.checks.window import OK, SCAN_CHARS, error_line, indent_levels, window
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine, InfillRequest

MODULE = """import os


class A:
    x = 1

    def f(self, a):
        if a:
            return 1
        y = foo(
            a,
        )
        return y

    def g(self):
        return 2


def top():
    pass
"""


def cut(source: str, marker: str, after: int = 0) -> tuple[str, str]:
    """(prefix, suffix) with the cursor ``after`` characters into ``marker`` and the rest of its line removed."""
    at = source.index(marker) + after
    return source[:at], source[source.index("\n", at) :]


def test_the_window_is_the_enclosing_method_dedented():
    prefix, suffix = cut(MODULE, "return 1", len("return"))
    win = window(prefix, suffix)
    assert win.shift == 4
    assert win.before.startswith("def f(self, a):\n    if a:\n")
    assert win.after.rstrip().endswith("return y") and "def g" not in win.after
    assert judge(win, " 1") == OK
    assert judge(win, " (1") == BLAMED  # an unclosed bracket in the answer's own line
    # The answer's later lines are dedented with the window.
    assert judge(win, " 1\n        z = 2") == OK


def test_at_column_zero_the_window_is_the_top_level_statement():
    prefix = MODULE[: MODULE.index("        y = foo(")]
    win = window(prefix, "\n" + MODULE[len(prefix) :])
    assert win.shift == 0 and win.before.startswith("class A:")
    assert judge(win, "        y = 2") == OK
    assert judge(win, "y = 2") == BLAMED  # ends the class: the method's next line is an unexpected indent


def test_an_error_elsewhere_blames_nobody_but_breaking_clean_code_is_blamed():
    broken = "def f():\n    x = (\n    y = 1\n    return "
    assert judge(window(broken, "\n"), "y") == ELSEWHERE  # the user's unclosed bracket, before the answer
    clean_prefix, clean_suffix = "def f(a):\n    if a:\n        b = 1\n", "\n    return a\n"
    win = window(clean_prefix, clean_suffix)
    assert error_line(win.source("")) == 0
    assert judge(win, "    a = b") == OK
    assert judge(win, "a = b") == BLAMED  # compiles alone, breaks the next line's indentation


def test_a_huge_file_is_judged_from_near_the_cursor():
    body = "".join(f"    x_{i} = {i}\n" for i in range(2_000_000))  # about 30 MB, one function
    win = window("def f():\n" + body + "    return ", "\n" + body)
    assert len(win.before) <= SCAN_CHARS and len(win.after) <= SCAN_CHARS
    assert judge(win, "x_1") == ELSEWHERE  # the window starts mid-function: no verdict, no crash


def test_compiled_not_only_parsed():
    assert error_line("return 1\n") > 0  # parses, does not compile
    assert error_line("def f():\n    return 1\n") == 0
    assert error_line("x = '\\d'\n") == 0  # a SyntaxWarning is no verdict
    assert error_line("x = 1\x00") == -1


NAMES = """import os
from collections import OrderedDict

LIMIT = 3


def helper(items):
    total = 0
    for item in items:
        total += item
    return total


class Box:
    def size(self, extra):
        return 0


def read_lines(path):
    with open(path) as f:
        return 0
"""


def in_read_lines() -> tuple[str, str]:
    """NAMES cut after ``return `` in ``read_lines``, a function at column 0."""
    marker = "    with open(path) as f:\n        return "
    return cut(NAMES, marker, len(marker))


def test_an_answer_that_uses_a_name_nothing_binds_is_blamed():
    """It compiles, but nothing could bind a name it loads: blamed. Anything that could bind it clears it:
    a builtin, the enclosing function, the answer itself, or the name written outside, except as another
    top-level function's or class's parameter or local."""
    prefix, suffix = in_read_lines()
    win = window(prefix, suffix)
    right = ("f.read()", "len(path)", "os.sep", "OrderedDict()", "LIMIT", "[x for x in f]", "helper(f)", "Box()")
    # The base of an attribute may be an import the file is about to get (a line from another file).
    for fine in (*right, "settings.DB_TIMEOUT", "np.zeros(3)"):
        assert judge(win, fine) == OK, fine
    for wrong in ("self.items.pop()", "f.read(size_hint)", "undefined_thing", "total", "items", "extra"):
        assert judge(win, wrong) == BLAMED, wrong
        assert win.names_missing(wrong)
    assert win.names_missing("f.read(size_hint") == []  # does not parse: no verdict on its names
    # In a method, self is the method's parameter; extra its own; a name written nowhere still is not.
    prefix, suffix = cut(NAMES, "        return 0\n\n\ndef read", len("        return "))
    win = window(prefix, suffix)
    assert judge(win, "self.size(extra)") == OK
    assert judge(win, "self.size(nothing_like_it)") == BLAMED


def test_a_name_bound_only_inside_another_function_is_blamed_but_not_one_bound_for_the_window():
    prefix = "X = 1\n\ndef g():\n    global Y\n    Y = 2\n\n"
    prefix += "def outer(a):\n    z = 3\n    def inner(b):\n        return "
    suffix = "\n    return inner\n\ndef later(q):\n    w = q\n    return w\nn = 4\nif n:\n    m = 5\n"
    win = window(prefix, suffix)
    # Module level (before or after, in a block at column 0 too), ``global``, an enclosing function, a
    # definition's own name: each binds it. Another function's parameter or local does not.
    for fine in ("X", "Y", "z", "a", "b", "n", "m", "inner", "later(1)", "outer", "g()"):
        assert judge(win, fine) == OK, fine
    for wrong in ("q", "w", "q + X"):
        assert judge(win, wrong) == BLAMED, wrong


def test_names_are_not_judged_where_they_cannot_be():
    prefix, suffix = in_read_lines()
    assert judge(window(prefix, suffix, whole=False), "undefined_thing") == OK  # a slice of the document
    assert judge(window("from os.path import *\n" + prefix, suffix), "undefined_thing") == OK  # a star import
    # A name the user began before the cursor is theirs: the answer only completes it.
    assert judge(window(prefix + "undefined_", suffix), "thing") == OK
    assert judge(window(prefix + "f.read(", suffix), "undefined_thing)") == BLAMED
    # Nor is the rest of the line after the cursor the answer's.
    assert judge(window("def f(x):\n    y = ", " + later_helper(x)\n    return y\n"), "x") == OK
    assert judge(window("from os.path import *\n", "\n"), "x = join('a', 'b')") == OK  # in the window itself
    assert judge(window("cls = dict\n\n\ndef f(x):\n    return ", "\n"), "cls(x)") == OK  # bound at column 0
    assert judge(window("def f(x):\n    return ", "\n"), "cls(x)") == BLAMED
    huge = "x = 1\n" * (MAX_DOCUMENT // 6)  # too large to search on a keystroke: not judged
    assert judge(window(huge + "def f():\n    return ", "\n"), "undefined_thing") == OK
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the parse's SyntaxWarning (an odd escape) is no verdict, no crash
        assert judge(window("def f():\n    p = '\\d'\n    return ", "\n"), "p + missing_name") == BLAMED


def test_a_draft_that_uses_a_name_nothing_binds_is_not_offered(engine):
    """The document's likeliest continuation of ``return `` uses ``self`` in a function at column 0: for
    Python the next one is offered to the model instead; without a language it is offered and shown."""
    prefix, suffix = in_read_lines()
    # Its copy sits below the same line as the cursor's: the likeliest by the lines around it.
    stack = "class Stack:\n    def pop(self, path):\n        with open(path) as f:\n            return self.items.pop()"
    doc = stack + "\n\n\n" + prefix
    plain = engine.complete(InfillRequest(doc, suffix, mode="line"))
    assert plain.draft is not None and plain.text == "self.items.pop()"
    checked = engine.complete(InfillRequest(doc, suffix, mode="line", language="python"))
    assert checked.draft is not None and checked.text == "0"  # Box.size's (the model takes it here)


def test_reindentations_at_a_blank_line_only():
    prefix, suffix = "def f(a):\n    for x in a:\n", "\n    return a\n"
    assert indent_levels(prefix, suffix)[:2] == [8, 4]
    assert reindentations("print(x)", prefix, suffix)[:2] == ["        print(x)", "    print(x)"]
    assert reindentations("if x:\n    y()", prefix, suffix)[0] == "        if x:\n            y()"
    assert reindentations("x)", "def f(a):\n    g(", suffix) == []  # mid-line: the indentation is set
    assert reindentations("\tx", "def f(a):\n", suffix) == []  # tabs: left alone


def test_shortened_keeps_whole_leading_lines():
    assert shortened("a = 1\nb = (\nc") == ["a = 1\nb = (", "a = 1"]
    assert shortened("one line") == []


def test_repair_order_and_withholding():
    prefix, suffix = "def f(a):\n    for x in a:\n", "\n    return a\n"
    win = window(prefix, suffix)
    never = lambda: pytest.fail("sampled although a cheaper repair worked")  # noqa: E731
    assert repair("total += x", prefix, suffix, win, (), never) == ("        total += x", "reindented")
    block = "        total += x\n        if x:"
    assert repair(block, prefix, suffix, win, (), never) == ("        total += x", "shortened")
    asked = []
    samples = ["        (", "        print(x)"]
    assert repair("        (", prefix, suffix, win, (), lambda: asked.append(1) or samples) == (
        "        print(x)",
        "replaced",
    )
    assert asked == [1]
    # Nothing compiles: where the window compiles without an answer, or with ``pass`` in its place (the
    # loop's missing body), nothing is shown; where it is broken anyway, the answer stays.
    assert win.clean and error_line(win.source("")) != 0
    assert repair("        (", prefix, suffix, win, (), lambda: ["        ]"]) == ("", "withheld")
    broken_prefix = "def f(a):\n    b = )\n"
    broken = window(broken_prefix, suffix)
    assert not broken.clean
    assert repair("    (", broken_prefix, suffix, broken, (), lambda: ["    ]"]) == ("    (", "kept")
    clean_prefix = "def f(a):\n    b = 1\n"
    clean = window(clean_prefix, suffix)
    assert repair("    (", clean_prefix, suffix, clean, (), lambda: ["    ]"]) == ("", "withheld")
    assert repair("    (", clean_prefix, suffix, clean, ["    b += 1"], never) == ("    b += 1", "replaced")
    # Mid-line where the call being typed is all that breaks the window: a blamed answer is withheld,
    # unsampled; where the window is broken before it (a typo the user left), the answer stays.
    mid_prefix = "def f(a):\n    x = foo(a, "
    mid = window(mid_prefix, "\n    return a\n")
    assert mid.unfinished and not mid.clean
    assert repair("b))", mid_prefix, "\n    return a\n", mid, (), never) == ("", "withheld")
    typo_prefix = "def f(a):\n    y = = 1\n    x = foo(a, "
    typo = window(typo_prefix, "\n    return a\n")
    assert not typo.unfinished
    assert repair("b))", typo_prefix, "\n    return a\n", typo, (), never) == ("b))", "kept")
    # Mid-line where the typed part compiles (a partial name): a broken answer is withheld, unsampled;
    # alternatives the user asked for are still tried.
    typed = "def f(a):\n    x = fo"
    partial = window(typed, "\n    return a\n")
    assert partial.clean
    assert repair("o(a b", typed, "\n    return a\n", partial, (), never) == ("", "withheld")
    assert repair("o(a b", typed, "\n    return a\n", partial, ["o(a)"], never) == ("o(a)", "replaced")
    # A line left unfinished is finished: its open brackets closed, a colon added (never punctuation alone).
    assert repair("o(a", typed, "\n    return a\n", partial, (), never) == ("o(a)", "closed")
    header = "class A:\n    def f"
    assert repair("(self, x)", header, "\n        pass\n", window(header, "\n        pass\n"), (), never) == (
        "(self, x):",
        "closed",
    )
    assert (
        closed("(", "x = ") == []
        and closed("a)", "x = ") == []
        and closed("f('(', a", "x = ") == ["f('(', a)", "f('(', a):"]
    )


def test_a_hole_where_a_block_header_was_is_judged():  # and a block's lines with it
    # The body after the cursor is indented deeper: the line to write is a header (``for ...:``), so the
    # window compiles with ``if True:`` in its place ("headed") and an answer whose own line does not
    # compile is blamed there. An error below the answer is not: a stray indent the user left below
    # looks the same as a removed header.
    prefix, suffix = "def f(a):\n    total = 0\n", "\n        total += x\n    return total\n"
    win = window(prefix, suffix)
    assert error_line(win.source("")) != 0 and win.headed and not win.clean and win.strict
    assert judge(win, "    for x in a:") == OK
    assert judge(win, "    else") == BLAMED
    assert judge(win, "    x = 1") == ELSEWHERE
    never = lambda: pytest.fail("sampled although a cheaper repair worked")  # noqa: E731
    assert repair("    else", prefix, suffix, win, (), lambda: ["    try:"]) == ("", "withheld")
    assert repair("    else", prefix, suffix, win, ["    for x in a:"], never) == ("    for x in a:", "replaced")
    stray = ("def f(a):\n    x = 1\n", "\n        y = 2\n    return y\n")
    assert check("    z = 3", *stray, sample=never)[:2] == ("    z = 3", "elsewhere")
    # At column 0 of a line that holds code (a hole whose answer carries its own line break, as
    # HumanEval-Infilling cuts them), the line to write ends with a line break.
    prefix, suffix = "def f(a):\n    total = 0\n", "        total += x\n    return total\n"
    win = window(prefix, suffix)
    assert win.headed
    assert judge(win, "    for x in a:\n") == OK
    assert judge(win, "    x = (\n") == BLAMED
    body = window("def f(a):\n    for x in a:\n", "        pass\n    return a\n")
    assert body.clean and judge(body, "        print(x)\n") == OK and judge(body, "    print(x)\n") == BLAMED
    assert indent_levels("def f(a):\n    for x in a:\n", "        pass\n")[:1] == [8]
    # A block removed with its header and the start of its body: the code after it is two levels in,
    # then dedents to one; or it goes on with ``elif``: a header or statement start stands in for each.
    prefix = "def f(a):\n    n = 0\n"
    deep = "            n += x\n        n -= 1\n    return n\n"
    win = window(prefix, deep)
    assert error_line(win.source("")) != 0 and win.headed
    assert judge(win, "    for x in a:\n") == ELSEWHERE  # one header is not enough, but the error is below
    assert judge(win, "    for x in a:\n        if x:\n") == OK
    assert judge(win, "    for x in a:\n        if x\n") == BLAMED
    prefix = "def f(a):\n    for x in a:\n"
    goes_on = "        elif x:\n            a = 2\n    return a\n"
    assert window(prefix, goes_on).headed and judge(window(prefix, goes_on), "        if a:\n            a = 1\n") == OK
    # In a method (the window dedented), the stand-in is in the document's columns, as an answer is.
    prefix = "class A:\n    def f(self, a):\n        n = 0\n"
    method = "                n += 1\n            n -= 1\n        return n\n"
    assert window(prefix, method).headed
    # A comment's indentation says nothing of the code's: the next code line is the one that counts.
    commented = window("def f(a):\n    for x in a:\n", "\n                # note\n    return a\n")
    assert commented.clean
    # In the indentation of a line of code, nothing stands in for a line.
    inside = window("def f(a):\n    total = 0\n    ", "total += x\n    return total\n")
    assert inside.placeholder == ""


def test_an_answer_that_leaves_the_code_below_dead_is_blamed():
    # Where a block's ``else:`` was removed, the code below is in the jump's own block: a ``return``
    # there compiles but leaves it dead. Deeper or shallower code below, an open bracket or a line
    # continuation, a one-line ``if``: nothing is dead.
    prefix = "def f(a):\n    if a:\n        x = 1\n"
    suffix = "\n        x = 2\n    return x\n"
    win = window(prefix, suffix)
    answers = ("    else:", "        return", "        return x", "        raise ValueError(a)")
    answers += ("        x = 3\n        return x",)
    for dead in answers:
        assert (judge(win, dead) == BLAMED) == dead.lstrip().startswith(("return", "raise", "x = 3")), dead
    assert judge(win, "    else:") == OK and not win.unreachable_below("    else:")
    assert win.unreachable_below("        return x") and win.unreachable_below("        return x\n        # done")
    for alive in ("        return_value = 3", "        returned.x = 3", "        if x: return x", "        y = 3"):
        assert judge(win, alive) == OK and not win.unreachable_below(alive), alive
    # The jump closes its block: the next code line is shallower (a comment between does not count).
    below = window("def f(items):\n    for x in items:\n        if x:\n", "\n        # skip\n    return None\n")
    for fine in ("            continue", "            break", "            return x"):
        assert judge(below, fine) == OK, fine
    # The cursor in the middle of a line: the rest of the line belongs to the answer's last line.
    mid = window("def f(a):\n    if a:\n        return (", "a)\n        a = 2\n    return a\n")
    assert mid.unreachable_below("") and judge(mid, "") == BLAMED
    open_call = window("def f(a):\n    if a:\n        return g(", "\n            a)\n    return a\n")
    assert not open_call.unreachable_below("a,")
    assert judge(win, "        return g(\n            x)") == BLAMED  # a jump over several lines
    # Prose in a docstring is not code, whatever its words.
    doc = window('def f(a):\n    """Sum.\n\n    ', '\n    of a and b.\n    """\n    return a\n')
    assert judge(doc, "return the sum") == OK
    # Drafts and samples are held to it too: a draft that leaves dead code is not offered.
    assert fits(win, "    else:") and not fits(win, "        return x")


def test_a_header_that_holds_nothing_to_guess_is_drafted_where_the_code_needs_it():
    # The if-body ends with a return and the code below goes on at its level: dead as it stands, an
    # ``else:`` was removed. At column 0 (a hole that takes the whole line) the header is drafted at the
    # level that compiles; after the indentation, as the rest of the line.
    prefix, suffix = "def f(a):\n    if a:\n        return 1\n", "\n        return 2\n"
    win = window(prefix, suffix)
    assert win.dead_at_cursor and header_drafts(win, prefix, suffix) == ["    else:"]
    assert header_drafts(window(prefix + "    ", suffix), prefix + "    ", suffix) == ["else:"]
    # Below, an ``except`` at the cursor's level: the body is a ``try:``'s.
    prefix, suffix = "def f(a):\n    ", "\n        x = g()\n    except E:\n        x = 0\n    return x\n"
    assert header_drafts(window(prefix, suffix), prefix, suffix) == ["try:"]
    # Nothing dead, nothing broken: whether an ``else:`` goes there is the model's guess, not the compiler's.
    for prefix, suffix in (
        ("def f(a):\n    if a:\n        x = 1\n", "\n        x = 2\n    return x\n"),
        ("def f(a):\n    for x in a:\n        if x:\n            return 1\n", "\n        return 2\n    return 3\n"),
    ):
        assert header_drafts(window(prefix, suffix), prefix, suffix) == []
    # The code below is deeper after a block: ``if x:`` as likely as ``else:``; no draft.
    prefix, suffix = "def f(a):\n    if a:\n        x = 1\n    ", "\n        x = 2\n    return x\n"
    assert header_drafts(window(prefix, suffix), prefix, suffix) == []
    # Something typed on the line, or after the cursor: no header draft.
    prefix, suffix = "def f(a):\n    if a:\n        return 1\n    el", "\n        return 2\n"
    assert header_drafts(window(prefix, suffix), prefix, suffix) == []


def test_the_engine_offers_the_header_the_compiler_leaves(engine):
    prefix, suffix = "def sign(n):\n    if n < 0:\n        return -1\n", "\n        return 1\n"
    done = engine.complete(InfillRequest(prefix, suffix, mode="line", language="python"))
    assert done.draft is not None and done.draft["source"] == "syntax"
    assert done.text in ("    else:", "")  # the model keeps it, or the answer is withheld: never dead code


def test_an_answer_blamed_on_the_line_being_typed_is_withheld():
    # The typed part of the line does not compile, but only at or after the cursor (``if `` before
    # ``]``): the line is unfinished, and an answer the compiler blames there is wrong, not the victim
    # of an edit elsewhere.
    prefix, suffix = "def f(a):\n    return [x for x in a if ", "]\n"
    win = window(prefix, suffix)
    assert win.unfinished and not win.clean
    never = lambda: pytest.fail("sampled mid-line")  # noqa: E731
    assert check("x else", prefix, suffix, sample=never)[:2] == ("", "withheld")
    assert check("x > 0", prefix, suffix, sample=never)[:2] == ("x > 0", "ok")
    # A typo before the cursor is the user's, not the line unfinished: the answer stays.
    typo = "def f(a):\n    retrun a"
    assert not window(typo, "\n").unfinished
    assert check(" +", typo, "\n", sample=never)[:2] == (" +", "kept")
    # Unfinished before the cursor: a string or a bracket left open (here or lines above, the statement
    # still being typed), which a right answer closes.
    body = "\n        return 1\n    return 2\n"
    string = "def f(u):\n    if u:\n        pass\n    elif u == 'EN"
    assert window(string, body).unfinished
    assert check("D':", string, body, sample=never)[:2] == ("D':", "ok")
    assert check("D' +", string, body, sample=never)[:2] == ("", "withheld")
    call = "def f(a):\n    x = foo(\n        a,\n        b, "
    assert window(call, "\n    return x\n").unfinished
    assert check("a)", call, "\n    return x\n", sample=never)[:2] == ("a)", "ok")
    assert check("a))", call, "\n    return x\n", sample=never)[:2] == ("", "withheld")
    assert still_open("x = f(a, [1, 'a(b'") == ("", "])") and still_open('s = """a\n b') == ('"""', "")
    assert still_open("a)") is None and still_open("x = 1  # (") is None
    assert still_open("a\r\n'b\\\r\nc") == ("'", "")  # a backslash before a CRLF line break


def test_is_python():
    assert is_python("python") and is_python("/a/b.py") and is_python("file:///x/y.pyi")
    assert not is_python(None) and not is_python("javascript") and not is_python("a.js")


@pytest.fixture(scope="module")
def engine(shipped_model_dir):
    settings = load_settings({"model": str(shipped_model_dir)}, environ={}, user_file=shipped_model_dir / "none")
    return Engine(settings)


def humaneval_single(n: int) -> list[dict]:
    with gzip.open(DATA_DIR / SETS["single"], "rt", encoding="utf-8") as fh:
        tasks = [json.loads(line) for line in fh]
    return tasks[:: len(tasks) // n][:n]


def test_the_engine_shows_python_that_compiles_or_nothing(engine):
    """Whatever the model says: where the code compiles without an answer, the answer shown compiles
    (or is empty). Without a language, or with the setting at 0, answers are not judged."""
    verdicts = []
    for task in humaneval_single(40):
        prefix, suffix = task["prompt"], "\n" + task["suffix"]
        done = engine.complete(InfillRequest(prefix, suffix, mode="line", language="python"))
        verdicts.append(done.syntax)
        assert "syntax" in done.timings_ms
        win = window(prefix, suffix)
        if error_line(win.source("")) == 0:
            # (a decorator the answer ends with compiles as the window judges it: with a def to follow)
            assert done.text == "" or win.error_line(done.text) == 0, (task["task_id"], done.text)
            assert done.syntax in ("ok", "reindented", "shortened", "closed", "replaced", "withheld")
        plain = engine.complete(InfillRequest(prefix, suffix, mode="line"))
        assert plain.syntax == ""
    assert verdicts.count("ok") < len(verdicts)  # the shipped model's answers do get repaired here
    assert {"reindented", "replaced", "withheld"} & set(verdicts), verdicts


def test_the_setting_turns_it_off(shipped_model_dir):
    settings = load_settings(
        {"model": str(shipped_model_dir), "syntax_candidates": 0}, environ={}, user_file=shipped_model_dir / "none"
    )
    off = Engine(settings)
    task = humaneval_single(1)[0]
    assert (
        off.complete(InfillRequest(task["prompt"], "\n" + task["suffix"], mode="line", language="python")).syntax == ""
    )


def test_the_language_server_judges_python_documents_only(shipped_model_dir):
    """Through the real server: a Python document's answers get the compiler's verdict (and the shown
    text compiles where the code compiled without it), a plain-text document's do not."""
    from tests.lsp_session import Session, run

    text = "def total(items):\n    result = 0\n    for item in items:\n        \n    return result\n"
    win = window(text[: text.index("        \n") + 8], text[text.index("        \n") + 8 :])
    assert error_line(win.source("")) != 0 and win.clean  # a loop without a body: it compiles with one

    async def scenario():
        s = Session(shipped_model_dir, {"drafts": False})
        await s.start()
        s.open("file:///project/app.py", text, "python")
        s.open("file:///project/notes.txt", text, "plaintext")
        py = await s.inline("file:///project/app.py", 3, 8)
        py_timing = s.timings[-1]
        txt = await s.inline("file:///project/notes.txt", 3, 8)
        txt_timing = s.timings[-1]
        await s.stop()
        return py, py_timing, txt, txt_timing

    py, py_timing, txt, txt_timing = run(scenario())
    get = lambda obj, key: obj[key] if isinstance(obj, dict) else getattr(obj, key)  # noqa: E731
    verdict = get(py_timing, "syntax")
    assert verdict in ("ok", "reindented", "shortened", "closed", "replaced", "withheld"), verdict
    assert get(txt_timing, "syntax") == ""
    assert (verdict == "withheld") == (not py.items)
    for item in py.items:
        assert error_line(win.source(item.insert_text)) == 0


def test_a_decorator_line_compiles_before_the_function_it_decorates_is_written():
    # The window ends before a line at column 0, and the function may not be written yet: a decorator
    # is judged as if one followed it; a broken one is still blamed.
    assert judge(window("import pytest\n\n@pytest.fix", "\n"), "ture") == OK
    assert judge(window("import pytest\n\n@pytest.fix", "\ndef f():\n    pass\n"), "ture") == OK
    assert judge(window("import enum\n\n", "\nclass A:\n    pass\n"), "@enum.unique") == OK
    assert judge(window("class A:\n    @prop", "\n"), "erty") == OK
    assert judge(window("import pytest\n\n@pytest.fix", "\n"), "ture(") == BLAMED
    assert judge(window("def f(x):\n    return ", "\n"), "@x") == BLAMED


def test_a_docstring_line_is_judged_inside_its_string():
    # A module docstring's prose at column 0 looks like statements, so the window may start or end
    # inside the string: a line that opens or closes it is judged as if the window lay inside it.
    prose = "Tools for things.\n\nMore words here.\n"
    suffix = "\n" + prose + '"""\nimport os\n'
    assert judge(window("", suffix), '"""Summary line.') == OK
    assert judge(window("# comment\n", suffix), "'''Summary.") == BLAMED  # closed by nothing
    assert judge(window('"""Summary.\n' + prose, "\nimport os\n"), '"""') == OK
    assert judge(window('"""Summary.\n' + prose, "\nimport os\n"), '"""x(') == BLAMED
    assert judge(window("def f():\n    ", "\n    return 1\n"), '"""Doc.') == BLAMED
    assert judge(window('"""Summary.\n' + prose, '\n"""\nimport os\n'), "More prose, (") == OK  # inside it
    # A quote counted inside another string opens nothing: only a window that compiles as a string counts.
    assert judge(window("x = \"'''\"\n\ndef f():\n    ", "\n"), "return (") == BLAMED
    # Only at module level does the window reach on to a closing quote after it: in a function, a
    # quote that a later docstring's lone closing line would close is still blamed.
    later = '\n    return 1\n\n\ndef g():\n    """\n    Doc.\n    """\n'
    assert judge(window("def f():\n    ", later), '"""') == BLAMED


def test_nonlocal_in_a_nested_function_names_the_enclosing_ones():
    # The window of a nested def is that def alone: its nonlocal names are bound outside the window.
    outer = "def outer():\n    a = 1\n    def inner():\n        "
    assert judge(window(outer, "\n        a += 1\n    return inner\n"), "nonlocal a") == OK
    assert judge(window(outer, "\n        a += 1\n    return inner\n"), "nonlocal a +") == BLAMED
    assert judge(window("def f():\n    a = 1\n    ", "\n"), "nonlocal a") == BLAMED  # nothing encloses f
    assert judge(window(outer + "a = 2\n        ", "\n    return inner\n"), "nonlocal a") == BLAMED  # after use


def test_where_the_window_does_not_compile_the_drafts_that_make_it_compile_go_first():
    from celeris_complete.drafts.table import Draft
    from celeris_complete.engine.drafting import fitting

    found = [Draft("rows = [x]", "document", 4), Draft("cols = [", "document", 2), Draft("y = 1", "document", 2)]
    prefix = "def d():\n    x = compute()\n    "
    broken = "\n        x,\n    ]\n    return cols\n"  # the line that opened the bracket is missing
    assert [d.text for d in fitting(found, window(prefix, broken), 2, prefix, broken, "block")] == [
        "cols = [",
        "rows = [x]",
    ]
    whole = "\n    return rows\n"  # compiles as it is: the ranking stands
    assert [d.text for d in fitting(found, window(prefix, whole), 2, prefix, whole, "block")] == [
        "rows = [x]",
        "cols = [",
    ]
    nothing = "\n        x,\n    }\n"  # no draft makes it compile: the ranking stands
    assert [d.text for d in fitting(found, window(prefix, nothing), 1, prefix, nothing, "block")] == ["rows = [x]"]
