"""Next edits: the edit history, the token-level change, propagation, ``bench edits``' mining, and
``celeris/nextEdit`` through the real language server."""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

from celeris_complete.bench.edits import mine, run_task, summarize
from celeris_complete.edits.change import apply_ops, ops
from celeris_complete.edits.history import MAX_EDITS, EditHistory
from celeris_complete.edits.prompt import history_of, read, write
from celeris_complete.edits.propagate import suggest
from celeris_complete.serve.next_edits import rewrite_region
from tests.lsp_session import Session, run
from tests.second_tier import Endpoint


def typed(lines: list[str], line: int, col: int, text: str, history: EditHistory) -> list[str]:
    """``text`` typed at (line, col) key by key, each key a change as an editor sends it."""
    for ch in text:
        history.change(lines, line, line, ch)
        lines = lines[:line] + [lines[line][:col] + ch + lines[line][col:]] + lines[line + 1 :]
        col += 1
    return lines


def erased(lines: list[str], line: int, col: int, n: int, history: EditHistory) -> list[str]:
    """``n`` characters before (line, col) deleted with backspace."""
    for _ in range(n):
        history.change(lines, line, line, "")
        lines = lines[:line] + [lines[line][: col - 1] + lines[line][col:]] + lines[line + 1 :]
        col -= 1
    return lines


DOC = """def area(width, height):
    size = width * height
    # the size, in square units
    print(size)
    return size + size


def main():
    return area(1, 2) + area(3, 4)
""".splitlines(keepends=True)


def test_a_name_retyped_key_by_key_is_one_edit_and_its_other_uses_follow():
    h = EditHistory()
    lines = erased(DOC, 1, 8, 4, h)  # "size" -> ""
    lines = typed(lines, 1, 4, "total", h)
    assert len(h.edits) == 1 and h.edits[0].before == DOC[1]
    got = suggest(lines, h, 1)
    assert got is not None and got.kind == "rename"
    # The nearest use below (the comment's "size" is prose, left alone), then the one after it.
    assert (got.first, got.last) == (3, 4) and got.new == "    print(total)\n    return total + total\n"
    assert got.remaining == 0


def test_undone_typing_suggests_nothing_and_the_history_stays_bounded():
    h = EditHistory()
    lines = typed(DOC, 1, 8, "_sq", h)
    lines = erased(lines, 1, 11, 3, h)
    assert lines == DOC and suggest(lines, h, 1) is None
    lines = ["pass\n"] * 200
    for i in range(3 * MAX_EDITS):  # edits lines apart: one each
        lines = typed(lines, 3 * i, 0, " ", h)
    assert len(h.edits) == MAX_EDITS and [e.line for e in h.edits] == list(range(3 * 32, 3 * 48, 3))


def test_a_paste_is_too_big_to_be_a_pattern():
    h = EditHistory()
    paste = "x = size\n" * 10_000
    h.change(DOC, 4, 4, paste)
    lines = DOC[:4] + paste.splitlines(keepends=True) + DOC[4:]
    assert h.edits[0].big and suggest(lines, h, 4) is None
    lines = typed(lines, 10_007, 0, "y", h)  # an edit after it is one of its own
    assert len(h.edits) == 2 and h.edits[1].line == 10_007


def test_a_name_that_is_not_bound_here_changes_only_in_its_context():
    doc = ["if isinstance(a, dict):\n", "    b = dict(a)\n", "if isinstance(c, dict):\n", "    pass\n"]
    h = EditHistory()
    h.change(doc, 0, 1, "if isinstance(a, Mapping):\n", whole_lines=True)
    lines = ["if isinstance(a, Mapping):\n", *doc[1:]]
    got = suggest(lines, h, 0)
    assert got is not None and got.kind == "repeat" and (got.first, got.new) == (2, "if isinstance(c, Mapping):\n")


def test_a_parameter_added_to_a_definition_is_carried_to_its_calls():
    h = EditHistory()
    lines = typed(DOC, 0, 22, ", depth", h)
    got = suggest(lines, h, 0)
    assert got is not None and got.kind == "call"
    assert got.new == "    return area(1, 2, depth) + area(3, 4, depth)\n"


def test_changes_as_tokens():
    (op,) = ops("    x = compute(a, b)\n", "    x = compute(a, b, c)\n")
    assert op.old == () and op.new == ", c" and apply_ops("y = compute(1, b)", [op]) == "y = compute(1, b, c)"
    assert apply_ops("y = compute(1, c)", [op]) is None  # not in its context
    assert ops("x = 1\n", "x  =  1\n") == []  # white space only: no change to repeat
    (op,) = ops("toolz.curry(toolz.filter)\n", "toolz.curry(filter)\n")
    assert apply_ops("toolz.curry(toolz.map)", [op]) is None
    assert apply_ops("toolz.curry(toolz.map)", [op.loosened()]) == "toolz.curry(map)"


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_bench_edits_mines_each_category_from_a_git_history(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    body = ["def f(count):\n", "    return count\n", *["\n"] * 8, "x = count\n", *["\n"] * 40]
    body += ["def g():\n", "    n = count + 1\n", "    return n\n"]
    (repo / "m.py").write_text("".join(body))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    renamed = [line.replace("count", "total") for line in body]
    (repo / "m.py").write_text("".join(renamed))
    git(repo, "commit", "-qam", "rename")  # three hunks, each the same change
    (repo / "m.py").write_text("".join(renamed).replace("n = total + 1", "n = total + 2"))
    git(repo, "commit", "-qam", "one small change")  # noise
    tasks = mine(repo)
    assert sorted(t.category for t in tasks) == ["below", "far", "noise"]  # the rename's first and last hunk
    results = {t.category: run_task(t) for t in tasks}
    assert results["below"]["exact"] and not results["noise"]["suggested"]
    summary = summarize(list(results.values()))
    assert summary["noise"]["quiet"] == 1.0 and summary["below"]["exact"] == 1.0


def as_dict(value):
    if isinstance(value, list):
        return [as_dict(v) for v in value]
    if hasattr(value, "_asdict"):
        return {k: as_dict(v) for k, v in value._asdict().items()}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: as_dict(v) for k, v in vars(value).items()}
    return value


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_next_edit_through_the_language_server(tmp_path, encoding):
    async def main():
        session = Session(tmp_path / "no-model", encodings=[encoding])
        init = await session.start(wait_ready=False)
        assert "nextEdit" in (as_dict(init.capabilities.experimental) or {})
        uri = "file:///w/m.py"
        # "é" and "😀" before the edits: the ranges count them in the negotiated units
        text = 's = "é😀"; size = 1\nprint(size)\nq = "😀"; r = size\n'
        session.open(uri, text)
        assert await session.next_edit(uri, 0, 0) is None  # no edit yet
        at = 11 if encoding == "utf-16" else 10  # 's = "é😀"; ': 😀 is two UTF-16 units, one code point
        for i in range(4):  # "size" deleted key by key on line 0, then "total" typed
            session.replace(uri, (0, at + 3 - i), (0, at + 4 - i), "")
        for i, ch in enumerate("total"):
            session.replace(uri, (0, at + i), (0, at + i), ch)
        got = as_dict(await session.next_edit(uri, 0, at + 5))
        assert got["kind"] == "rename" and got["version"] == session.versions[uri] and got["remaining"] == 0
        # Both lines below, one edit each, cut to the name: 'q = "😀"; r = ' is 14 UTF-16 units, 13 code points.
        name_on_2 = 14 if encoding == "utf-16" else 13
        assert got["edits"] == [
            {"range": {"start": {"line": 1, "character": 6}, "end": {"line": 1, "character": 10}}, "newText": "total"},
            {
                "range": {"start": {"line": 2, "character": name_on_2}, "end": {"line": 2, "character": name_on_2 + 4}},
                "newText": "total",
            },
        ]
        # A full-text change is an edit too; a closed document, or a secret one, gets nothing.
        whole = "file:///w/whole.py"
        session.open(whole, "x = 1\nprint(x)\n")
        session.replace_all(whole, "renamed = 1\nprint(x)\n")
        got = as_dict(await session.next_edit(whole, 0, 7))
        assert got["edits"] == [
            {"range": {"start": {"line": 1, "character": 6}, "end": {"line": 1, "character": 7}}, "newText": "renamed"}
        ]
        session.close(uri)
        assert await session.next_edit(uri, 0, 0) is None
        secret = "file:///w/.env"
        session.open(secret, "token = 1\nuse(token)\n")
        session.replace(secret, (0, 0), (0, 5), "key")
        assert await session.next_edit(secret, 0, 3) is None
        # A paste of 10,000 lines: answered, quickly, with nothing to suggest from it.
        session.open(uri, text)
        session.replace(uri, (1, 0), (1, 0), "a = size\n" * 10_000)
        t0 = time.perf_counter()
        assert await session.next_edit(uri, 10_001, 0) is None
        assert time.perf_counter() - t0 < 30
        await session.stop()

    run(main())


def test_next_edit_refuses_malformed_params(tmp_path):
    async def main():
        session = Session(tmp_path / "no-model")
        await session.start(wait_ready=False)
        with pytest.raises(Exception, match="nextEdit takes"):
            await session.client.protocol.send_request_async("celeris/nextEdit", {"position": 3})
        await session.stop()

    run(main())


def test_the_mercury_edit_prompt_round_trips_and_its_diff_becomes_the_history():
    text = "def scale(factor):\n    print(size)\n    return size * 2\n"
    lo, hi = text.index("    print"), len(text)
    diffs = "--- a/s.py\n+++ b/s.py\n@@ -1,1 +1,1 @@\n-def scale(size):\n+def scale(factor):\n"
    message = write("s.py", text, lo, hi, lo, diffs)
    prompt = read(message)
    assert (prompt.path, prompt.text, prompt.region, prompt.cursor) == ("s.py", text, text[lo:], 0)
    lines, history = history_of(prompt)
    assert history.edits[0].before == "def scale(size):\n" and suggest(lines, history, 1).kind == "rename"
    region, kind = rewrite_region(prompt)
    assert (region, kind) == ("    print(factor)\n    return factor * 2\n", "rename")
    with pytest.raises(ValueError, match="current_file_content"):
        read("no prompt here")


def test_the_edit_endpoint_answers_where_propagation_is_off(shipped_model_dir, tmp_path):
    """``edit_endpoint`` = a real ``celeris-complete serve``: celeris/nextEdit sends the Mercury prompt
    (the region near the cursor, the history as diffs) and shows the region's rewrite as one edit."""
    from tests.test_serve import Served

    served = Served(tmp_path / "serve.log", "--model", str(shipped_model_dir), "--log-level", "warning")
    try:
        served.wait_ready()

        async def main():
            options = {"edit_endpoint": served.url, "next_edit_local": False}
            session = Session(tmp_path / "no-model", init_options=options)
            await session.start(wait_ready=False)
            uri = "file:///w/scale.py"
            session.open(uri, "def scale(size):\n    print(size)\n    return size * 2\n")
            session.replace(uri, (0, 10), (0, 14), "factor")
            got = as_dict(await session.next_edit(uri, 0, 16))
            assert got["kind"] == "remote" and got["version"] == session.versions[uri]
            # One edit from the first change to the last: "size)\n    return size" -> "factor)\n    return factor".
            (edit,) = got["edits"]
            assert edit["range"] == {"start": {"line": 1, "character": 10}, "end": {"line": 2, "character": 15}}
            assert edit["newText"] == "factor)\n    return factor"
            await session.stop()

        run(main())
    finally:
        served.stop()


class Broken(Endpoint):
    """An edit endpoint that answers what is not JSON, or (``delay_s``) too late."""

    delay_s = 0.0
    posts = 0

    def do_POST(self) -> None:
        self.body()
        type(self).posts += 1
        time.sleep(self.delay_s)
        self.send(b"<html>not json</html>", kind="text/html")


@pytest.mark.parametrize("delay_s", [0.0, 30.0])
def test_a_broken_edit_endpoint_is_reported_once_and_never_blocks(tmp_path, delay_s):
    handler = type("BrokenHere", (Broken,), {"delay_s": delay_s, "posts": 0})
    server, url = handler.start()

    async def main():
        options = {"edit_endpoint": url, "next_edit_local": False, "edit_budget_ms": 500}
        session = Session(tmp_path / "no-model", init_options=options)
        await session.start(wait_ready=False)
        uri = "file:///w/scale.py"
        session.open(uri, "def scale(size):\n    print(size)\n")
        session.replace(uri, (0, 10), (0, 14), "factor")
        t0 = time.perf_counter()
        assert await session.next_edit(uri, 0, 16) is None
        assert time.perf_counter() - t0 < 15  # the budget (0.5 s, and 1 s grace), never the endpoint's 30 s
        session.replace(uri, (1, 0), (1, 0), "#")
        assert await session.next_edit(uri, 1, 1) is None  # resting after the failure: not asked
        assert handler.posts == 1
        await asyncio.sleep(1.2)  # (the first rest is 1 s) asked again: it fails again, and says so only in the log
        session.replace(uri, (1, 1), (1, 1), "#")
        assert await session.next_edit(uri, 1, 2) is None
        shown = [m.message for m in session.messages if "next-edit endpoint" in m.message]
        assert len(shown) == 1 and ("chat completion" in shown[0] or "within" in shown[0]), shown
        await session.stop()

    try:
        run(main())
        assert handler.posts == 2
    finally:
        server.shutdown()


def test_a_repeated_change_goes_only_to_lines_shaped_like_the_edited_one():
    doc = [
        "x = compute(a, b)\n",
        "report(total, compute(q, b), width, height, title, footer)\n",  # holds the pattern, unlike the line
        "y = compute(c, b)\n",
    ]
    h = EditHistory()
    h.change(doc, 0, 1, "x = compute(a, b, scale)\n", whole_lines=True)  # line 0 replaced whole
    lines = ["x = compute(a, b, scale)\n", *doc[1:]]
    got = suggest(lines, h, 0)
    assert got is not None and (got.first, got.new) == (2, "y = compute(c, b, scale)\n") and got.remaining == 0


def test_a_whole_line_replaced_leaves_the_next_line_out_of_the_edit():
    """An editor that sends a line's replacement as (line, 0)-(line + 1, 0) touches only that line: the next
    one may take the change (before, the edit held it, and it was never suggested)."""
    from lsprotocol import types as lsp

    from celeris_lsp.document import FastDocument
    from celeris_lsp.next_edit import predict, snapshot

    doc = FastDocument("file:///w/a.py", "x = compute(a, b)\ny = compute(c, b)\n")
    rng = lsp.Range(start=lsp.Position(0, 0), end=lsp.Position(1, 0))
    doc.apply_change(lsp.TextDocumentContentChangePartial(range=rng, text="x = compute(a, b, scale)\n"))
    assert [(e.line, e.count) for e in doc.history.edits] == [(0, 1)]
    assert predict(snapshot(doc), 0).new == "y = compute(c, b, scale)\n"


def test_of_the_lines_a_change_applies_to_the_likest_is_taken_before_a_nearer_one():
    doc = [
        "x = compute(a, b)\n",
        "z = compute(d, b) or w or v\n",  # nearer, less like the edited line (6 of 13 tokens in common)
        "pass\n",
        "y = compute(c, b)\n",  # 6 of 10
    ]
    h = EditHistory()
    h.change(doc, 0, 1, "x = compute(a, b, scale)\n", whole_lines=True)
    lines = ["x = compute(a, b, scale)\n", *doc[1:]]
    got = suggest(lines, h, 0)
    assert got is not None and (got.first, got.new) == (3, "y = compute(c, b, scale)\n") and got.remaining == 1


def test_random_edit_storms_keep_the_history_bounded_and_in_the_document():
    """Thousands of random changes (typing, deletions across lines, pastes, undo-like reversals), as
    incremental and full syncs: the history stays within its bound, every edit within the document, and
    a prediction never raises."""
    import random

    from lsprotocol import types as lsp

    from celeris_lsp.document import FastDocument
    from celeris_lsp.next_edit import predict, snapshot

    rng = random.Random(7)
    doc = FastDocument("file:///w/storm.py", "".join(DOC) * 5)
    for step in range(3000):
        text = doc.source
        a, b = sorted(rng.randrange(len(text) + 1) for _ in range(2))
        b = min(b, a + rng.choice((0, 1, 5, 40, 400)))
        new = rng.choice(("", "x", "size", "\n", "    total = size\n", "".join(DOC), "(", ")"))
        if step % 97 == 0:
            doc.apply_change(lsp.TextDocumentContentChangeWholeDocument(text=text[:a] + new + text[b:]))
        else:
            lines = text[:a].split("\n"), text[:b].split("\n")
            rng_ = lsp.Range(
                start=lsp.Position(len(lines[0]) - 1, len(lines[0][-1])),
                end=lsp.Position(len(lines[1]) - 1, len(lines[1][-1])),
            )
            doc.apply_change(lsp.TextDocumentContentChangePartial(range=rng_, text=new))
        assert doc.source == text[:a] + new + text[b:]
        n = len(doc.lines)
        assert len(doc.history.edits) <= MAX_EDITS
        assert all(0 <= e.line and e.line + e.count <= n + 1 for e in doc.history.edits), doc.history.edits
        if step % 50 == 0:
            predict(snapshot(doc), rng.randrange(n + 1))


def test_rewrites_reorders_and_constants_are_not_patterns():
    def after(doc: list[str], line: int, new: str) -> object:
        h = EditHistory()
        h.change(doc, line, line + 1, new, whole_lines=True)
        return suggest(doc[:line] + new.splitlines(keepends=True) + doc[line + 1 :], h, line)

    # A new variable, used once: lines were added (a rewrite), so ``raw`` is not renamed everywhere.
    doc = ["def f(raw):\n", "    return g(raw, raw)\n", "\n", "def h(raw):\n", "    return k(raw)\n"]
    assert after(doc, 1, "    escaped = raw.strip()\n    return g(raw, escaped)\n") is None
    assert after(doc, 1, "    return g(raw, escaped)\n").new == "    return k(escaped)\n"  # (in one line: a rename)
    # Names that changed places in an import are a reorder, not two renames.
    doc = ["from common import a, skip, rows, cols\n", "skip('slow')\n", "cols(1)\n"]
    assert after(doc, 0, "from common import a, cols, rows, skip\n") is None
    # ``self`` (a constant) replaced in one place is not renamed at every method.
    doc = ["class A:\n", "    def f(self):\n", "        return self in {self.X}\n", "    def g(self):\n", "        1\n"]
    assert after(doc, 2, "        return self in {A.X}\n") is None
