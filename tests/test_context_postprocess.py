from celeris_complete.checks.brackets import line_is_open
from celeris_complete.checks.postprocess import choose_mode, postprocess
from celeris_complete.model.context import build_context


def test_context_layout_and_file_markers(small_tok):
    t = small_tok
    ctx = build_context(t, "def f():\n    return ", "\n\nx = 1\n", 100, 100)
    assert ctx.tokens[0] == t.suf_id
    p = ctx.tokens.index(t.pre_id)
    assert ctx.tokens[p - 1] == t.file_id and ctx.tokens[p + 1] == t.file_id  # both windows reach the file ends
    assert t.decode(ctx.tokens[p + 2 :]) + ctx.heal == "def f():\n    return "
    assert t.decode(ctx.tokens[1 : p - 1]) == "\n\nx = 1\n"


def test_windows_respect_budgets_and_huge_text(small_tok):
    t = small_tok
    huge = "value = compute(1, 2)\n" * 200_000  # ~4 MB on each side
    ctx = build_context(t, huge + "    y = ", huge, 50, 20)
    assert 10 < ctx.prefix_tokens <= 50 and ctx.suffix_tokens == 20
    assert t.file_id not in ctx.tokens
    p = ctx.tokens.index(t.pre_id)
    assert (t.decode(ctx.tokens[p + 1 :]) + ctx.heal).endswith("    y = ")


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


def test_prefix_window_is_anchored_while_typing(small_tok):
    """Typing at the cursor only appends to the context (so the cache can reuse it)."""
    t = small_tok
    base = "".join(f"def function_{i}(a, b):\n    return a * {i} + b\n\n" for i in range(200))
    typed = "result = compute_the_total(values, weights) + offset"
    contexts = [build_context(t, base + typed[:n], "\n", 256, 64, heal=False).tokens for n in range(len(typed))]
    # Only the word being typed may be tokenized anew; the window start moves rarely.
    extends = sum(
        later[: len(earlier) - 8] == earlier[: len(earlier) - 8] for earlier, later in zip(contexts, contexts[1:])
    )
    assert extends >= len(typed) - 3


def test_token_healing_cuts_a_partial_word(small_tok):
    t = small_tok
    ctx = build_context(t, "def f(items):\n    return len(ite", "\n", 100, 10)
    assert ctx.heal and "ite".endswith(ctx.heal.lstrip())
    p = ctx.tokens.index(t.pre_id)
    assert t.decode(ctx.tokens[p + 2 :]) + ctx.heal == "def f(items):\n    return len(ite"
    assert build_context(t, "x = (", "", 100, 10).heal == ""


def test_token_healing_takes_back_blanks_typed_after_code_but_never_indentation(small_tok):
    t = small_tok
    for prefix in ("def f(k):\n    k ", "def f(x):\n    return x  "):
        ctx = build_context(t, prefix, "\n", 100, 10)
        assert ctx.heal and not ctx.heal.strip(" ") and prefix.endswith(ctx.heal)
        p = ctx.tokens.index(t.pre_id)
        assert t.decode(ctx.tokens[p + 2 :]) + ctx.heal == prefix
    assert build_context(t, "def f():\n    ", "\n", 100, 10).heal == ""  # a blank line's indentation stays


def test_a_line_that_cannot_end_at_the_cursor():
    opened = ("        rv.", "    for item in ", "        k ", "x = f(a", "x = [1, 2", 'x = "ab', "if a and", "y = x +")
    for line in opened:
        assert line_is_open(line), line
    for line in ("    return", "    return x", "if x:", 'x = "ab"', "    ", "", '    """doc', "x = 1  # a", "f(a)[0]"):
        assert not line_is_open(line), line


def test_brackets_the_suffix_closes_are_not_closed_twice():
    assert postprocess("a, b), c", "f(", ")\n", "line") == "a, b"
    assert postprocess("x[0])", "print(", ")\n", "line") == "x[0]"
    assert postprocess("g(x)", "f(", ")\n", "line") == "g(x)"
    assert postprocess("')' + x", "f(", ")\n", "line") == "')' + x"
    assert postprocess("a)", "f(", "\n", "line") == "a)"  # nothing after the cursor closes it


def test_line_rules_follow_the_documents_language():
    # A brace opens a block that goes on below: the line may end (in Python a `{` opens a dict).
    for family in ("js", "go", "rust", "java", "c"):
        assert not line_is_open("if (x > 0) {", family) and not line_is_open("func f() {", family)
        assert line_is_open("const total = ", family) and line_is_open("foo(a, ", family)
        # `//` starts a comment there: what it holds opens nothing (nor does `#`, which is no comment).
        assert not line_is_open("x = y // see f(", family)
    assert line_is_open("x = {") and line_is_open("x = {", None) and not line_is_open("x = y  # f", "python")
    assert line_is_open("x = y // see f(", "python")
    assert not line_is_open("local x = y -- see f(", "lua")
