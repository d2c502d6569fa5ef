import sys

from celeris_complete.drafts import search as drafts
from celeris_complete.drafts.search import find_draft
from celeris_complete.drafts.table import LineTable

DOC = """import os

def load(path):
    with open(path) as f:
        return f.read()

def save(path, text):
    with open(path, "w") as f:
        f.write(text)

def append(path, text):
    with open(path, "a") as f:
        f.write(text)
"""


def test_the_most_common_continuation_of_the_typed_line_in_the_document():
    d = find_draft(DOC + "\ndef size(path):\n    with open(", "\n")
    # Three ties: the one whose neighbours look most like the cursor's (`def load(path):` above it).
    assert (d.text, d.source, d.count) == ("path) as f:", "document", 2)
    d = find_draft(DOC + "\ndef size(path):\n        f.wr", "\n")
    assert (d.text, d.count) == ("ite(text)", 4)  # two document lines agree (each counts twice)


def test_lines_after_the_cursor_count_too_and_the_cursor_line_does_not():
    d = find_draft("def f():\n    x = compute(", "a, b)\n    x = compute(a, c)\n    x = compute(a, c)\n")
    assert (d.text, d.count) == ("a, c)", 4)  # the rest of the cursor's own line ("a, b)") is not a draft


def test_at_a_line_start_the_line_that_follows_the_same_line_elsewhere():
    d = find_draft(DOC + "\ndef size(path):\n    with open(path) as f:\n        ", "\n")
    assert d is not None and d.text == "return f.read()" and d.source == "document"


def test_too_little_typed_or_nothing_alike_gives_no_draft():
    assert find_draft(DOC + "\n    w", "") is None  # one character
    assert find_draft(DOC + "\n    zebra = ", "") is None
    assert find_draft("", "") is None


USERS = """def add_user(db, user):
    check(user)
    db.session.add(user)
    db.session.commit()

def add_group(db, group):
    check(group)
"""


def test_at_a_line_start_else_the_line_whose_neighbours_look_like_the_cursors():
    d = find_draft(USERS + "    ", "\n    db.session.commit()\n")
    assert (d.text, d.source) == ("db.session.add(user)", "context")  # between check(...) and commit()
    d = find_draft(USERS + "\n    ", "\n\n    db.session.commit()\n")  # blank lines around the cursor
    assert (d.text, d.source) == ("db.session.add(user)", "context")
    assert find_draft(USERS + "        ", "\n    db.session.commit()\n") is None  # no line at that indentation
    assert find_draft(USERS + "    ", "\n    return group.id\n") is None  # nothing alike enough around it


def test_of_lines_as_alike_the_nearest_and_none_where_the_line_goes_on_after_the_cursor():
    doc = "    check(a)\n    FIRST\n    commit()\n\n    check(a)\n    SECOND\n    commit()\n    check(b)\n    "
    assert find_draft(doc, "\n    commit()\n").text == "SECOND"
    assert find_draft(doc.replace("\n", "\r\n"), "\r\n    commit()\r\n").text == "SECOND"
    assert find_draft(doc, "x = 1\n    commit()\n") is None  # the cursor's line has text after it
    # Several (an invoked request's alternatives): the most alike first, each line once, none below MIN_CONTEXT.
    from celeris_complete.drafts.search import find_drafts

    doc = "    check(a)\n    FIRST\n    commit()\n    check(a)\n    SECOND\n    log()\n    FIRST\n    commit()\n"
    got = find_drafts(doc + "    check(b)\n    ", "\n    commit()\n", limit=4)
    assert [(d.text, d.source) for d in got] == [("FIRST", "context"), ("SECOND", "context")]


def test_a_line_between_alike_lines_is_looked_for_near_the_cursor_only(monkeypatch):
    far = USERS.replace("def add_group", "x = 1\n" * 40 + "def add_group")
    assert find_draft(far + "    ", "\n    db.session.commit()\n").text == "db.session.add(user)"
    monkeypatch.setattr(drafts, "CONTEXT_WINDOW", 200)
    assert find_draft(far + "    ", "\n    db.session.commit()\n") is None
    monkeypatch.setattr(drafts, "CONTEXT_WINDOW", 20_000)
    monkeypatch.setattr(drafts, "CONTEXT_LINES", 30)  # as many characters, too many lines
    assert find_draft(far + "    ", "\n    db.session.commit()\n") is None


def test_when_no_line_starts_alike_the_longest_end_of_the_line_that_recurs_in_the_document():
    doc = "result.update(first_dict, second_dict)\nlog(b, a, y)\nlog(a, x)\nlog(a, x)\n"
    d = find_draft(doc + "def f():\n    other = combine(first_dict, ", "\n")
    assert (d.text, d.source, d.count) == ("second_dict)", "line-end", 1)
    # The longest end that recurs decides: "(p, a, " gives "c)", though ", a, " alone would vote for "b)".
    assert find_draft("f(q, a, b)\nf(q, a, b)\ng(p, a, c)\n    h(p, a, ", "\n").text == "c)"
    assert find_draft("    h(b, a, ", "\nlog(b, a, y)\n").text == "y)"  # below the cursor too
    assert find_draft(doc + "    h(a", "\n") is None  # "(a": too short an end to go by
    # A line that starts as the cursor's does comes first, whatever the ends elsewhere say.
    d = find_draft(doc + "log(b, a, z)\n    log(b, a, ", "\n")
    assert (d.text, d.source) == ("z)", "document")
    crlf = doc.replace("\n", "\r\n") + "    other = combine(first_dict, "
    assert find_draft(crlf, "\r\n").text == "second_dict)"
    # A line's end followed by data (a long string) gives no draft: MAX_LINE characters at most.
    blob = "    other = 'QUJ" + "A" * 300 + "'\n"
    assert find_draft(blob + "    data = 'QUJ", "\n") is None
    assert find_draft(blob + "    data = 'QUJ", "\n" + "    more = 'QUJQ'\n").text == "Q'"


def test_the_line_end_is_looked_for_near_the_cursor_only(monkeypatch):
    monkeypatch.setattr(drafts, "TAIL_WINDOW", 100)
    far = "compute(alpha, beta)\n" + "x = 1\n" * 30
    assert find_draft(far + "    y = run(alpha, ", "\n") is None
    assert find_draft("    y = run(alpha, ", "\n" + "x = 1\n" * 10 + "compute(alpha, beta)\n").text == "beta)"


def test_workspace_lines_after_the_document_and_never_the_file_itself():
    table = LineTable()
    table.set_file("a.py", "x = 1\nresult = session.query(User).filter(User.id == uid).one()\n")
    table.set_file("b.py", "result = session.query(User).filter(User.id == uid).one()\nprint(result)\n")
    table.set_file("me.py", "result = session.query(Order).all()\n" * 5)
    d = find_draft("def get(uid):\n    result = session.query(", "\n", table, exclude="me.py")
    assert (d.text, d.source, d.count) == ("User).filter(User.id == uid).one()", "workspace", 2)
    d = find_draft("result = session.query(User).filter(User.id == uid).one()\n", "\n", table, exclude="me.py")
    assert (d.text, d.source) == ("print(result)", "workspace")
    table.remove("b.py")
    table.remove("a.py")
    assert find_draft("    result = session.query(", "\n", table, exclude="me.py") is None
    assert find_draft("    result = session.query(", "\n", table).text == "Order).all()"


def test_a_workspace_majority_outvotes_a_document_line_far_from_the_cursor_but_not_one_beside_it():
    table = LineTable()
    for i in range(10):
        table.set_file(f"{i}.py", "    logger = logging.getLogger(__name__)\n")
    far = "logger = logging.getLogger('x')\n" + "pass\n" * 2000
    d = find_draft(far + "\ndef f():\n    logger = logging.getL", "\n", table)
    assert (d.text, d.source, d.count) == ("ogger(__name__)", "workspace", 10)
    d = find_draft("logger = logging.getLogger('x')\n\ndef f():\n    logger = logging.getL", "\n", table)
    assert (d.text, d.source, d.count) == ("ogger('x')", "document", 2)


def test_of_continuations_alike_otherwise_the_one_whose_names_are_in_use_near_the_cursor():
    from celeris_complete.drafts.search import find_drafts

    table = LineTable()
    table.set_file("a.py", "def a(values):\n    for k, v in values.items():\n        pass\n" * 2)
    table.set_file("b.py", "def b(d):\n    for k, v in d.items():\n        pass\n")
    got = find_drafts("def c(values, x):\n    y = 1\n    for k, v", "\n", table, limit=2)
    assert [(d.text, d.count) for d in got] == [(" in values.items():", 2), (" in d.items():", 1)]
    got = find_drafts("def c(d, x):\n    y = 1\n    for k, v", "\n", table, limit=2)
    assert [(d.text, d.count) for d in got] == [(" in d.items():", 1), (" in values.items():", 2)]  # `d` in use


def test_the_table_stays_right_through_many_files_replaced_and_removed():
    table = LineTable()
    for i in range(300):
        table.set_file(f"gone/{i}.py", f"value_{i} = compute({i})\nif ready:\n    start_{i}()\n" * 20)
    table.set_file("keep.py", "if ready:\n    launch()\nvalue = compute(1)\n")
    table.set_file("keep.py", "if ready:\n    launch(now=True)\nvalue = compute(2)\n")  # replaced
    for i in range(300):
        table.remove(f"gone/{i}.py")
    assert table._rows < 4 * 1024  # the rows of removed files were dropped
    d = find_draft("x = 1\nif ready:\n", "\n", table)
    assert (d.text, d.source, d.count) == ("launch(now=True)", "workspace", 1)
    assert find_draft("    value = compute(", "\n", table).text == "2)"
    # The buckets that the kept file shares with the removed ones held 300 sources each: their dicts
    # are copied to their present size (a dict keeps its largest size otherwise).
    assert all(sys.getsizeof(per) == sys.getsizeof(dict(per)) for per in table._buckets.values())
    assert sys.getsizeof(table._buckets["if r"]) < 1000


def test_a_file_gives_at_most_so_many_votes_for_the_line_after_a_line():
    from celeris_complete.drafts.table import FOLLOWING_PER_FILE

    table = LineTable()
    table.set_file("a.py", "try:\n    import fast\n" * (FOLLOWING_PER_FILE + 10))
    table.set_file("b.py", "try:\n    import slow\n")
    d = find_draft("def f():\n    try:\n        ", "\n", table)
    assert (d.text, d.count) == ("import fast", FOLLOWING_PER_FILE)
    d = find_draft("def f():\n    try:\n        ", "\n", table, exclude="a.py")
    assert (d.text, d.count) == ("import slow", 1)


def test_several_drafts_cheapest_first_then_by_votes_each_once():
    from celeris_complete.drafts.search import find_drafts
    from celeris_complete.drafts.table import Draft

    first = [Draft("path) as f:", "typing-cache", 1), Draft("", "previous", 1)]
    got = find_drafts(DOC + "\ndef size(path):\n    with open(", "\n", limit=3, first=first)
    assert [(d.text, d.source) for d in got] == [
        ("path) as f:", "typing-cache"),  # the document's own vote for it does not repeat it
        ('path, "a") as f:', "document"),  # as alike as the next one (`def ...(path, text):`), and nearer
        ('path, "w") as f:', "document"),
    ]


def test_an_answer_shown_on_the_line_is_a_draft_after_the_text_after_the_cursor_changed():
    from lsp.typing_cache import TypingCache

    cache = TypingCache()
    cache.store("u", "x = 1\n    total = compute(", "\n", "items, rate)")
    assert cache.lookup("u", "x = 1\n    total = compute(it", ")\n") is None  # the suffix changed
    (d,) = cache.drafts("u", "x = 1\n    total = compute(it")
    assert (d.text, d.source) == ("ems, rate)", "typing-cache")
    assert cache.drafts("u", "x = 1\n    total = compute(x") == []  # typed otherwise
    assert cache.drafts("other", "x = 1\n    total = compute(it") == []


def test_previous_answers_are_drafts_at_the_same_place_only():
    from celeris_complete.drafts.table import PreviousCompletions

    prev = PreviousCompletions(per_document=2, documents=2)
    prev.record("a", "def f():\n    y = g(", "1, 2)")
    assert [d.text for d in prev.drafts("a", "def f():\n    y = g(1")] == [", 2)"]
    assert prev.drafts("a", "def f():\n    y = g(") == []  # the very same cursor: that was the answer
    assert prev.drafts("a", "def h():\n    y = g(1") == []  # another place
    prev.record("b", "p", "q")
    prev.record("c", "p", "q")  # two documents remembered: "a" is forgotten
    assert prev.drafts("a", "def f():\n    y = g(1") == []


def test_of_drafts_accepted_whole_the_likelier_wins():
    import torch

    from celeris_complete.model.verify import DraftRule, choose

    probs = torch.full((3, 8), 0.01)
    probs[:, 1], probs[:, 2] = 0.5, 0.3  # every slot: token 1 likeliest, then 2
    drafts = [torch.tensor([2, 2, 2]), torch.tensor([1, 1, 1]), torch.tensor([5, 5])]
    verdict = choose([probs[: d.numel()] for d in drafts], drafts, DraftRule(threshold=0.1))
    assert (verdict.index, verdict.run) == (1, 3)
    assert choose([probs[:2]], [torch.tensor([5, 5])], DraftRule(threshold=0.1)).run == 0


def test_the_document_is_searched_line_by_line_whatever_the_line_endings():
    from collections import Counter

    from celeris_complete.drafts.search import _document_following, _document_lines

    text = "x = 1\r\n  total = add(a)\r\n\ttotal = add(b) \nnot total = add(c)\n total = \n"
    counts = Counter()
    _document_lines(text, "total = add(", counts)
    assert counts == Counter({"a)": 1, "b)": 1})  # after indentation only; CR and trailing blanks dropped
    text = "if x:\n    )\n    )\n    y()\n)  \r\n  z()\r\n)\n\n"
    counts = Counter()
    _document_following(text, ")", counts)
    # consecutive equal lines each count; blank lines give nothing
    assert counts == Counter({")": 1, "y()": 1, "z()": 1})


RETURNS = """def headers(data):
    headers = data.keys()
    return headers

def rows(data):
    rows = list(data)
    return rows

def values(data):
    values = data.values()
    return values

def totals(data):
    totals = sum(data)
    return values
"""


def test_continuations_are_ranked_by_how_alike_the_lines_around_their_copies_are():
    from celeris_complete.drafts.search import find_drafts

    # The copy whose line above looks like the cursor's (`rows = ...`) wins, not the first seen
    # (`headers`), the nearest or the most voted (`values`, twice in the document); then `totals = ...`
    # above `return values` is more like `rows = sorted(data)` than `headers = data.keys()` is.
    got = find_drafts(RETURNS + "\ndef more(data):\n    rows = sorted(data)\n    return ", "\n", limit=4)
    assert [(d.text, d.source, d.count) for d in got] == [
        ("rows", "document", 2),
        ("values", "document", 4),
        ("headers", "document", 2),
    ]
    # At a line's start, the line above the line before the cursor's decides between what followed it.
    doc = "if a:\n    pass\nelse:\n    return 1\n\nif b:\n    log()\nelse:\n    raise KeyError\n\n"
    assert find_drafts(doc + "if c:\n    log()\nelse:\n    ", "\n")[0].text == "raise KeyError"
    assert find_drafts(doc + "if c:\n    pass\nelse:\n    ", "\n")[0].text == "return 1"
    # Copies in workspace files count too, and the lines around them.
    table = LineTable()
    table.set_file("a.py", "x = load()\nreturn x\ny = build()\nreturn y\n")
    table.set_file("b.py", "y = build(1)\nreturn y\n")
    assert find_drafts("def f():\n    x = load(2)\n    return ", "\n", table)[0].text == "x"
    # Nothing around the cursor to compare: by votes.
    assert find_drafts("    return ", "", table)[0].text == "y"


def test_a_copys_neighbours_skip_blank_lines_but_not_far_and_never_a_long_line(monkeypatch):
    from celeris_complete.drafts.search import _line_next_to
    from celeris_complete.drafts.table import MAX_LINE

    text = "first()\r\n\r\n  \t\n    copy = 1\n\n\nlast()"
    at = text.index("copy")
    assert (_line_next_to(text, at, -1), _line_next_to(text, at, 1)) == ("first()", "last()")
    assert _line_next_to(text, 0, -1) == "" and _line_next_to(text, len(text) - 1, 1) == ""  # first / last line
    far = "above()\n" + "\n" * 5000 + "x\n" + "\n" * 5000 + "below()"
    at = far.index("x")
    assert _line_next_to(far, at, -1) == "" and _line_next_to(far, at, 1) == ""  # beyond NEIGHBOUR_REACH
    monkeypatch.setattr(drafts, "NEIGHBOUR_REACH", 20_000)
    assert (_line_next_to(far, at, -1), _line_next_to(far, at, 1)) == ("above()", "below()")
    long = "y" * (MAX_LINE + 5)
    text = f"{long}\nx\n{long}"
    assert _line_next_to(text, text.index("x"), -1) == "" and _line_next_to(text, text.index("x"), 1) == ""
    assert _line_next_to("a\nb\n" + long + "z", 2, 1) == ""  # the last line, unfinished, long too


def test_only_the_nearest_copies_of_a_continuation_are_kept_for_ranking():
    from collections import Counter

    from celeris_complete.drafts.search import _document_lines
    from celeris_complete.drafts.table import PLACES_LOOKED

    text = "".join(f"    total = add({i % 2})\n" for i in range(200))
    counts, places = Counter(), {}
    _document_lines(text, "total = add(", counts, places, last=True)  # above the cursor: the last ones
    assert counts == Counter({"0)": 100, "1)": 100})
    assert all(PLACES_LOOKED <= len(held) <= 2 * PLACES_LOOKED for held in places.values())
    assert max(i for _, i, _ in places["1)"]) == text.rindex("total = add(1)")
    places = {}
    _document_lines(text, "total = add(", Counter(), places)  # below it: the first ones
    pair = 2 * len("    total = add(0)\n")
    assert [i for _, i, _ in places["0)"]] == [text.index("total = add(0)") + pair * k for k in range(PLACES_LOOKED)]


def test_a_copy_under_the_cursors_very_line_above_counts_beyond_looking_alike(monkeypatch):
    from celeris_complete.drafts.search import find_drafts

    # `return data` sits among lines more alike to the cursor's on the whole (`rows = sorted(data,
    # key=len)` above, `print(data, rows)` below); `return rows` under exactly the cursor's line above.
    doc = (
        "def a(data):\n    rows = sorted(data)\n    return rows\n    x = 1\n\n"
        "def b(data):\n    rows = sorted(data, key=len)\n    return data\n    print(data, rows)\n\n"
    )
    prefix, suffix = doc + "def c(data):\n    rows = sorted(data)\n    return ", "\n    print(data)\n"
    assert [d.text for d in find_drafts(prefix, suffix, limit=2)] == ["rows", "data"]
    monkeypatch.setattr(drafts, "RANK_WEIGHTS", (*drafts.RANK_WEIGHTS[:5], 0.0, 0.0))
    assert [d.text for d in find_drafts(prefix, suffix, limit=2)] == ["data", "rows"]  # by likeness alone


def test_the_workspace_offers_lines_only_from_files_of_the_documents_family():
    """A Go file's lines are no drafts for a Python document, nor a Python file's for a Go one; TypeScript
    and JavaScript serve each other; a suffix no language knows serves only its own."""
    from collections import Counter

    from celeris_complete.drafts.search import find_drafts

    table = LineTable()
    table.set_file("pkg/a.py", "total = compute(items)\nprint(total)\n")
    table.set_file("pkg/b.go", "total = compute(items)\nfmt.Println(total)\n")
    table.set_file("web/c.js", "total = compute(items)\nconsole.log(total);\n")
    table.set_file("conf/d.toml", "total = compute(items)\nname = 1\n")

    def continued(family):
        counts = Counter()
        table.continuations("total = comp", None, counts, family=family)
        return counts

    def followed(family):
        counts = Counter()
        table.following("total = compute(items)", None, counts, family=family)
        return set(counts)

    assert continued(None) == Counter({"ute(items)": 4})
    assert continued("python") == Counter({"ute(items)": 1}) and continued("rust") == Counter()
    assert followed(None) == {"print(total)", "fmt.Println(total)", "console.log(total);", "name = 1"}
    assert followed("python") == {"print(total)"} and followed("go") == {"fmt.Println(total)"}
    assert followed("js") == {"console.log(total);"} and followed("toml") == {"name = 1"}
    # Through find_drafts, at a blank line after the line: what the document's family has.
    prefix, suffix = "def f(items):\n    total = compute(items)\n    ", "\n"
    got = find_drafts(prefix, suffix, table, "pkg/e.py", 3, family="python")
    assert [d.text for d in got] == ["print(total)"]
    table.remove("pkg/a.py")
    assert followed("python") == set()
