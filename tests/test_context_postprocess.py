from celeris_complete.context import build_context
from celeris_complete.postprocess import choose_mode, postprocess


def test_context_layout_and_file_markers(small_tok):
    t = small_tok
    ctx = build_context(t, "def f():\n    return ", "\n\nx = 1\n", 100, 100)
    assert ctx.tokens[0] == t.suf_id
    p = ctx.tokens.index(t.pre_id)
    assert ctx.tokens[p - 1] == t.file_id and ctx.tokens[p + 1] == t.file_id  # both windows reach the file ends
    assert t.decode(ctx.tokens[p + 2 :]) == "def f():\n    return "
    assert t.decode(ctx.tokens[1 : p - 1]) == "\n\nx = 1\n"


def test_windows_respect_budgets_and_huge_text(small_tok):
    t = small_tok
    huge = "value = compute(1, 2)\n" * 200_000  # ~4 MB on each side
    ctx = build_context(t, huge + "    y = ", huge, 50, 20)
    assert ctx.prefix_tokens == 50 and ctx.suffix_tokens == 20
    assert t.file_id not in ctx.tokens
    p = ctx.tokens.index(t.pre_id)
    assert t.decode(ctx.tokens[p + 1 :]).endswith("    y = ")


def test_empty_file(small_tok):
    ctx = build_context(small_tok, "", "", 100, 100)
    t = small_tok
    assert ctx.tokens == [t.suf_id, t.file_id, t.pre_id, t.file_id]


def test_modes():
    assert choose_mode("def f():\n    ", "auto") == "block"
    assert choose_mode("def f():\n    x = ", "auto") == "line"
    assert choose_mode("x", "block") == "block"


def test_line_mode_stops_at_end_of_line():
    assert postprocess("foo(bar)  \nmore", "x = ", "\n", "line") == "foo(bar)"


def test_no_text_that_already_follows_the_cursor():
    assert postprocess("len(items))", "n = max(", ")\n", "line") == "len(items)"
    assert postprocess("a, b)", "f(", ")\n", "line") == "a, b"


def test_block_stops_at_dedent_and_suffix_repeat():
    prefix = "def f(x):\n    "
    raw = "y = x + 1\n    return y\n\ndef g():\n    pass"
    assert postprocess(raw, prefix, "\n", "block") == "y = x + 1\n    return y"
    raw = "y = x + 1\n    return y\n    return y\n"
    assert postprocess(raw, prefix, "\n    return y\n", "block") == "y = x + 1"


def test_incomplete_utf8_is_dropped():
    assert postprocess("abc\ufffd", "", "", "line") == "abc"
