"""Import lines drafted from the names the document uses and nothing binds (``import_drafts.py``)."""

from collections import Counter

import pytest

from celeris_complete.config import load_settings
from celeris_complete.drafts.imports import import_drafts, parse_import, unbound_names, workspace_imports
from celeris_complete.drafts.table import LineTable
from celeris_complete.engine import Engine, InfillRequest

HEAD = "import os\nimport sys\n"
BODY = (
    "\n\ndef indent(text):\n"
    "    return textwrap.indent(text, os.sep)\n\n\n"
    "def rows(items: Iterable) -> list:\n"
    "    return [Row(i, sys.argv) for i in items]\n"
)
WORKSPACE = Counter({"import textwrap": 3, "from collections.abc import Iterable": 2, "from .table import Row": 1})


def test_parse_import():
    assert parse_import("from a.b import c, d as e") == ("a.b", [("c", "c"), ("d", "e")])
    assert parse_import("from . import x") == (".", [("x", "x")])
    assert parse_import("from x import (y, z)") == ("x", [("y", "y"), ("z", "z")])
    assert parse_import("import os.path, numpy as np") == (None, [("os.path", "os"), ("numpy", "np")])
    assert parse_import("from x import *") is None
    assert parse_import("import") is None and parse_import("x = 1") is None


def test_unbound_names_are_read_as_globals_and_bound_nowhere():
    source = "import os\nX = 1\n\ndef f(a):\n    b = a + X\n    return json.dumps(b, os.sep, len)\n"
    assert unbound_names(source) == {"json"}
    assert unbound_names("def f(:\n") is None
    assert unbound_names("x = 1\0") is None  # null bytes: no parse, no crash


def test_unevaluated_annotations_count_as_reads():
    future = "from __future__ import annotations\n\ndef f(x: Iterable, y: 'Mapping[str, Any]') -> Widget:\n    pass\n"
    assert unbound_names(future.replace("from __future__ import annotations", "")) == {"Iterable", "Widget"}
    assert unbound_names(future) == {"Iterable", "Mapping", "Any", "Widget"}


def test_names_bound_in_other_ways_are_not_unbound():
    declared = "def init():\n    global path\n    path = 1\n\ndef use():\n    return path\n"
    assert unbound_names(declared) == frozenset()
    assert unbound_names("xs = [(q := p) for p in ys]\nprint(q)\n") == {"ys"}
    literal = "from __future__ import annotations\n\ndef f(m: Literal['read'], n: Annotated[int, 'count']):\n    pass\n"
    assert unbound_names(literal) == {"Literal", "Annotated"}
    # A star import may bind anything: no drafts.
    assert import_drafts("from os import *\n", "\n\nprint(getcwd())\n", None) == []


def test_what_the_drafts_write_binds_the_names_the_document_uses():
    # ``import os.path`` binds ``os``: drafted as it is, never as ``import os.path as os``.
    assert import_drafts("import sys\n", "\n\nprint(os.path.join(sys.argv[0], os.getcwd()))\n",
                         lambda: Counter({"import os.path": 3})) == ["import os.path"]  # fmt: skip
    # Two ways to import one name with equal votes (``import datetime``, ``from datetime import datetime``):
    # one is chosen, nothing raises.
    tie = Counter({"import datetime": 1, "from datetime import datetime": 1})
    assert len(import_drafts("import os\n", "\n\nstamp = datetime.now()\n", lambda: tie)) == 1
    # Words in a docstring are not uses: ``time`` only used before a dot is still a module.
    below = '\n\n\ndef nap():\n    """Sleep for some time, then return."""\n    time.sleep(1)\n'
    assert import_drafts("import os\n", below, None) == ["import time"]


def test_the_cursor_line_s_indentation_is_part_of_the_cache_key():
    below = "\n\nx = textwrap.dedent(os.sep)\n"
    assert import_drafts("import os\n    import t", below, None) == []  # does not parse: nothing
    assert import_drafts("import os\nimport t", below, None) == ["extwrap"]


def test_a_type_checking_block_is_among_imports():
    prefix = "from __future__ import annotations\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    "
    below = "\n\n\ndef f(x: Iterable) -> None:\n    pass\n"
    workspace = Counter({"from collections.abc import Iterable": 1})
    assert import_drafts(prefix, below, lambda: workspace) == ["from collections.abc import Iterable"]


def test_where_the_workspace_is_silent_the_standard_library_says():
    below = "\n\n\nPoint = namedtuple('Point', 'x y')\nsize: Iterable = ()\n"
    assert import_drafts("import os\n", below, None) == ["from collections import namedtuple",
                                                         "from collections.abc import Iterable"]  # fmt: skip
    # A name only written before a dot is a module: ``time.sleep`` wants ``import time``, not datetime's.
    assert import_drafts("import os\n", "\n\ntime.sleep(1)\n", None) == ["import time"]


def test_the_missing_imports_are_drafted_in_sorted_place():
    # At a line's start between the imports: the one that sorts between its neighbours comes first.
    drafts = import_drafts(HEAD + "", "\n" + BODY, lambda: WORKSPACE)
    assert set(drafts) == {"import textwrap", "from collections.abc import Iterable", "from .table import Row"}
    # Sorted place before votes: only collections.abc sorts between abc and os.
    between = import_drafts("import abc\n", "\nimport os\n" + BODY, lambda: WORKSPACE)
    assert between[0] == "from collections.abc import Iterable"
    after_sys = import_drafts("import sys\n", "\nimport zlib\n" + BODY.replace("os.sep", "'.'"), lambda: WORKSPACE)
    assert after_sys[0] == "import textwrap"  # sys < textwrap < zlib
    # The start typed: what follows it.
    assert import_drafts(HEAD + "from collections", "\n" + BODY, lambda: WORKSPACE) == [".abc import Iterable"]
    assert import_drafts(HEAD + "import t", "\n" + BODY, lambda: WORKSPACE) == ["extwrap"]


def test_names_from_one_module_share_a_line_unless_the_document_writes_one_per_line():
    body = "\n\nx = Path(a), PurePath(b), PosixPath(c)\n"
    workspace = Counter({"from pathlib import Path": 2, "from pathlib import PurePath, PosixPath": 1})
    assert import_drafts("import os\n", body, lambda: workspace) == ["from pathlib import Path, PosixPath, PurePath"]
    single = "from pathlib import Path\nfrom pathlib import PosixPath\n"
    assert import_drafts(single, "\nimport os\n" + body.replace("Path(a), ", "1, ").replace("PosixPath(c)", "3"),
                         lambda: workspace)[0] == "from pathlib import PurePath"  # fmt: skip


def test_nothing_where_no_import_is_written():
    asked = []

    def workspace():
        asked.append(1)
        return WORKSPACE

    code = "x = 1\n"
    assert import_drafts(code, "\ny = textwrap.dedent(x)\n", workspace) == []  # no import around the line
    assert import_drafts(HEAD + "f", "\n" + BODY, workspace) != []  # "f" may start "from" among imports
    assert import_drafts(HEAD + "for", "\n" + BODY, workspace) == []
    assert import_drafts(HEAD + "import ", "textwrap\n" + BODY, workspace) == []  # the line goes on after the cursor
    assert import_drafts(HEAD, "\n" + "def f(:\n", workspace) == []  # does not parse
    assert import_drafts(HEAD, "\nx = 1\n", workspace) == []  # nothing unbound
    assert import_drafts(HEAD, "\nx = Row(1)\n", None) == []  # nothing says how to import Row
    assert len(asked) == 1  # the workspace is asked only where a draft may come of it


def test_where_nothing_says_how_the_lines_around_and_the_names_use_guess():
    items = "from tomlkit.items import String\nfrom tomlkit.items import Table\n"
    below = "\nfrom tomlkit.items import Trivia\n\nx = [String, Table, Time, Trivia, Integer]\n"
    # Time sorts between Table and Trivia (Integer does not): from the module of the lines around.
    assert import_drafts(items, below, None)[0] == "from tomlkit.items import Time"
    assert import_drafts(items + "from tomlkit.items import T", below, None) == ["ime"]
    # The module typed: from it.
    assert import_drafts("import os\nfrom numbers import ", "\n\nx = Real\n", None) == ["Real"]
    # A name only ever used before a dot: a module of its own; a class or a bare name is none.
    used = "\n\nx = textwrap.dedent(y) + Widget.size + helper(textwrap.indent)\n"
    assert import_drafts("import os\n", used, None) == ["import textwrap"]
    assert import_drafts("import os\n", used + "textwrap = 1\n", None) == []  # bound after all


def test_workspace_imports_come_from_the_line_table():
    table = LineTable()
    table.set_file("a.py", "import textwrap\nfrom x import y\n\nx = 1\n")
    table.set_file("b.py", "import textwrap\n")
    assert workspace_imports(table, "b.py") == Counter({"import textwrap": 1, "from x import y": 1})
    assert workspace_imports(None, None) == Counter()


@pytest.fixture(scope="module")
def engine(shipped_model_dir):
    return Engine(load_settings({"model": str(shipped_model_dir)}, environ={}, user_file=shipped_model_dir / "none"))


def test_the_engine_completes_an_import_line_with_the_missing_import(engine):
    table = LineTable()
    table.set_file("other.py", "import textwrap\nfrom collections.abc import Iterable\n")
    prefix, suffix = "import os\nimport sys\n", "\n" + BODY.replace("Row(i, sys.argv)", "(i, sys.argv)")
    done = engine.complete(InfillRequest(prefix, suffix, mode="line", lines=table, source="doc.py", language="python"))
    assert done.draft is not None and done.draft["source"] == "import"
    assert done.text == "import textwrap"  # it sorts after sys; collections.abc would not
    plain = engine.complete(
        InfillRequest(prefix, suffix, mode="line", lines=table, source="doc.py")
    )  # not known as Python
    assert plain.draft is None or plain.draft["source"] != "import"
