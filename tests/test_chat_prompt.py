"""Fill-in-the-middle as a chat (backends/chat_prompt.py): the prompt, reading it back, and taking the
completion out of a chat model's reply."""

from celeris_complete.backends.chat_prompt import MARKER, build, extract, parse

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n\n\nprint(add(1, 2))\n"


def test_the_prompt_reads_back_as_the_code_around_the_cursor_and_its_mode():
    for mode in ("line", "block"):
        messages = build(PREFIX, SUFFIX, mode, "python")
        assert [m["role"] for m in messages] == ["system", "user"] and MARKER in messages[0]["content"]
        assert "```python\n" in messages[1]["content"]
        assert parse(messages) == (PREFIX, SUFFIX, "line" if mode == "line" else None)


def test_code_with_fences_or_the_marker_itself_keeps_its_meaning():
    prefix = 'doc = """\n```python\nx = 1\n```\n<FILL_HERE>\n"""\nvalue = '
    messages = build(prefix, "\n", "line")
    user = messages[1]["content"]
    assert "````\n" in user and "<FILL_HERE:" in user  # a longer fence, a marker of its own
    assert parse(messages) == (prefix, "\n", "line")


def test_a_chat_without_exactly_one_marker_in_its_last_user_message_is_not_a_fill_request():
    assert parse([{"role": "user", "content": "write a poem"}]) is None
    assert parse([{"role": "user", "content": "a <FILL_HERE> b <FILL_HERE> c"}]) is None
    assert parse([{"role": "system", "content": "x <FILL_HERE> y"}]) is None
    parts = [{"type": "text", "text": "x = <FILL_HERE>"}, {"type": "text", "text": "\ny = 2"}]
    assert parse([{"role": "user", "content": parts}]) == ("x = ", "\ny = 2", None)


def test_the_completion_is_taken_out_of_what_chat_models_reply():
    assert extract("a + b", PREFIX, SUFFIX, "line") == "a + b"
    assert extract("```python\n    return a + b\n```", PREFIX, SUFFIX, "line") == "a + b"  # fenced, line echoed
    assert extract("a + b\n\n\nprint(add(1, 2))", PREFIX, SUFFIX, "block") == "a + b\n\n"  # the suffix cut off
    assert extract("total = a +\n b", "x = 1\n", "\n", "line") == "total = a +"  # one line in line mode
