"""Snippets from other files: retrieval, .gitignore and secrets, following changes on disk."""

import platform
import sys
import time
from pathlib import Path

import pytest

from celeris_complete.drafts.snippets import SnippetIndex, chunk_text
from celeris_complete.model.context import build_context
from celeris_complete.system.workspace_files import GitIgnore
from celeris_lsp.workspace_index import SnippetSource, WorkspaceIndexer
from tests.conftest import resident_drop_after_free

HELPERS = """\
import json


def load_inventory(path):
    with open(path) as fh:
        return json.load(fh)


def restock_warehouse(inventory, supplier_catalog):
    for item in inventory:
        item.quantity += supplier_catalog.lookup(item.sku)
    return inventory
"""


def wait_for(condition, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_query_finds_the_chunk_sharing_identifiers_one_per_file():
    index = SnippetIndex()
    index.set_file("a.py", HELPERS)
    index.set_file("b.py", "def unrelated_function(x):\n    return x * 2\n")
    found = index.query("inv = load_inventory('x')\nrestock_warehouse(inv, supplier_catalog)\n", exclude="main.py")
    assert [s.source for s in found] == ["a.py"]
    assert "def restock_warehouse" in found[0].text
    assert index.query("restock_warehouse(inventory)", exclude="a.py") == []


def test_replacing_and_removing_a_file_updates_the_index():
    index = SnippetIndex()
    index.set_file("a.py", HELPERS)
    version = index.version
    index.set_file("a.py", "def brand_new_name(): pass\n")
    assert index.version > version
    assert index.query("restock_warehouse supplier_catalog") == []
    assert index.query("brand_new_name()")[0].source == "a.py"
    index.remove("a.py")
    assert len(index) == 0 and index.query("brand_new_name()") == []


def test_identifiers_of_removed_files_are_forgotten_and_queries_stay_right():
    index = SnippetIndex()
    index.set_file("keep.py", HELPERS)
    for i in range(1100):  # a large folder added, then deleted (more chunks than a compaction waits for)
        names = " ".join(f"name_{i}_{j}" for j in range(20))
        index.set_file(f"gone/{i}.py", f"def f_{i}():\n    return [{names}]\n")
    before = index.identifier_count
    assert before > 22_000
    for i in range(1100):
        index.remove(f"gone/{i}.py")
    # Forgotten at the compaction that the removals trigger (the last files removed after it may leave theirs).
    assert index.identifier_count < before // 10
    found = index.query("inv = load_inventory('x')\nrestock_warehouse(inv, supplier_catalog)\n")
    assert [s.source for s in found] == ["keep.py"] and "def restock_warehouse" in found[0].text
    index.set_file("new.py", "def brand_new_name(restock_warehouse): pass\n")
    assert index.query("brand_new_name(restock_warehouse)")[0].source == "new.py"


def test_freed_memory_is_given_back_where_the_allocator_can():
    from celeris_complete.system.memory import can_trim, release_freed_memory

    if not can_trim():
        assert platform.libc_ver()[0] != "glibc", "glibc has malloc_trim: memory.py must find it"
        pytest.skip(f"no malloc_trim in this C library ({platform.libc_ver()[0] or sys.platform}): nothing given back")
    released = []
    freed_mb, dropped_mb = resident_drop_after_free(lambda: released.append(release_freed_memory()))
    assert dropped_mb >= freed_mb / 2, f"{freed_mb:.0f} MB freed, resident memory fell by {dropped_mb:.0f} MB"
    assert released == [True], "it says whether the allocator released any"


def test_binary_and_huge_files_are_refused():
    index = SnippetIndex()
    assert not index.set_file("bin", "abc\x00def restock_warehouse")
    assert not index.set_file("huge", "x = 1\n" * 300_000)
    assert len(index) == 0


def test_chunks_overlap_and_cover_the_file():
    text = "".join(f"line_{i} = {i}\n" for i in range(40))
    chunks = chunk_text(text)
    covered = set()
    for start, body in chunks:
        covered.update(range(start, start + body.count("\n")))
    assert covered == set(range(40))


def test_snippets_go_before_the_prefix_each_ended_by_file(tiny_model_dir):
    from celeris_complete.model.directory import load_model_dir

    tok = load_model_dir(tiny_model_dir).tokenizer
    ctx = build_context(tok, "x = 1\n", "", 64, 16, snippets=["def helper_one():\n    pass\n"], snippet_budget=32)
    pre = ctx.tokens.index(tok.pre_id)
    after = ctx.tokens[pre + 1 :]
    assert tok.decode(after[: ctx.snippet_tokens - 1]) == "def helper_one():\n    pass\n"
    assert after[ctx.snippet_tokens - 1] == tok.file_id
    assert tok.decode(after[ctx.snippet_tokens :]) == "x = 1\n"
    # A snippet is cut to whole lines inside the budget; a tiny budget leaves none.
    long = "".join(f"value_{i} = compute_{i}()\n" for i in range(50))
    cut = build_context(tok, "x", "", 64, 16, snippets=[long], snippet_budget=40)
    assert 0 < cut.snippet_tokens <= 40
    start = cut.tokens.index(tok.pre_id) + 1
    assert tok.decode(cut.tokens[start : start + cut.snippet_tokens - 1]).endswith("\n")
    assert build_context(tok, "x", "", 64, 16, snippets=[long], snippet_budget=4).snippet_tokens == 0


def make_workspace(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "helpers.py").write_text(HELPERS)
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build" / "generated.py").write_text("def restock_warehouse_generated(supplier_catalog): pass\n")
    (root / "debug.log").write_text("restock_warehouse supplier_catalog\n")
    (root / ".env").write_text("SUPPLIER_CATALOG_TOKEN=restock_warehouse supplier_catalog\n")
    (root / "pkg" / ".gitignore").write_text("local_*.py\n!local_keep.py\n")
    (root / "pkg" / "local_scratch.py").write_text("restock_warehouse(supplier_catalog)\n")
    (root / "pkg" / "local_keep.py").write_text("restock_warehouse(supplier_catalog)\n")
    (root / "data.bin").write_bytes(b"\x00\x01restock_warehouse supplier_catalog")


def test_gitignore_rules_apply_below_their_folder(tmp_path):
    make_workspace(tmp_path)
    rules = GitIgnore(tmp_path)
    rules.load(tmp_path)
    rules.load(tmp_path / "pkg")
    assert rules.ignored(tmp_path / "build", is_dir=True)
    assert rules.ignored(tmp_path / "debug.log")
    assert rules.ignored(tmp_path / "pkg" / "local_scratch.py")
    assert not rules.ignored(tmp_path / "pkg" / "local_keep.py")
    assert not rules.ignored(tmp_path / "pkg" / "helpers.py")
    assert rules.ignored(tmp_path / ".git" / "config")


def test_workspace_index_respects_gitignore_and_secrets_and_follows_changes(tmp_path):
    make_workspace(tmp_path)
    index = SnippetIndex()
    indexer = WorkspaceIndexer(tmp_path, index, (".env", ".env.*", "*.pem"))
    indexer.start()
    try:
        assert indexer.ready.wait(10)
        root = tmp_path.resolve()
        assert sorted(index.sources()) == [str(root / "pkg" / "helpers.py"), str(root / "pkg" / "local_keep.py")]
        # New, changed and deleted files on disk are followed.
        (tmp_path / "pkg" / "fresh.py").write_text("def freshly_written_helper(arg): return arg\n")
        assert wait_for(lambda: index.query("freshly_written_helper(1)") != [])
        (tmp_path / "pkg" / "local_keep.py").unlink()
        assert wait_for(lambda: str(root / "pkg" / "local_keep.py") not in index.sources())
        (tmp_path / ".env.local").write_text("freshly_written_helper secret\n")
        (tmp_path / "debug2.log").write_text("freshly_written_helper\n")
        (tmp_path / "pkg" / "helpers.py").write_text("def renamed_helper_function(): pass\n")
        assert wait_for(lambda: index.query("renamed_helper_function()") != [])
        assert all(Path(s).name not in (".env.local", "debug2.log") for s in index.sources())
        # Un-ignoring by editing .gitignore takes effect.
        (tmp_path / ".gitignore").write_text("*.log\n")
        assert wait_for(lambda: str(root / "build" / "generated.py") in index.sources())
        assert str(root / ".env") not in index.sources()
        # Only source files: not data, documents or logs.
        (tmp_path / "notes.txt").write_text("freshly_written_helper notes\n")
        (tmp_path / "pkg" / "later.py").write_text("def later_helper(): pass\n")
        assert wait_for(lambda: str(root / "pkg" / "later.py") in index.sources())
        assert str(root / "notes.txt") not in index.sources()
    finally:
        indexer.stop()


def test_open_documents_other_than_the_current_give_snippets_and_choice_is_stable_on_a_line():
    source = SnippetSource()
    docs = {
        "/w/helpers.py": (HELPERS, 1, ""),
        "/w/main.py": ("restock_warehouse(", 3, ""),
        "/w/.env": (HELPERS, 1, "secret"),
    }
    source.sync_open(docs, current="/w/main.py")
    assert source.index.sources() == ["/w/helpers.py"]
    prefix = "from helpers import restock_warehouse\ninv = load_inventory(path)\nrestock_wa"
    first = source.choose("/w/main.py", prefix)
    assert [s.source for s in first] == ["/w/helpers.py"]
    assert source.choose("/w/main.py", prefix + "rehouse(inv") is first  # same line: same choice
    # Further down a file the choice moves in steps of 8 lines, so typing new lines keeps it (and the cache).
    long = "inv = load_inventory(path)\nrestock_warehouse(inv, supplier_catalog)\n" * 8 + "x = 1\nrestock_wa"
    on_17 = source.choose("/w/main.py", long)
    on_23 = source.choose("/w/main.py", long[:-10] + "".join(f"y{i} = {i}\n" for i in range(6)) + "restock_wa")
    assert on_17 and on_23 is on_17
    source.sync_open({**docs, "/w/helpers.py": ("def other_thing(): pass\n", 2, "")}, current="/w/main.py")
    assert source.choose("/w/main.py", prefix) == []


def test_the_index_is_capped():
    index = SnippetIndex(max_chunks=10)
    text = "".join(f"value_{i} = compute_{i}()\n" for i in range(100))
    assert not index.set_file("big.py", text) and len(index) == 0
    assert index.set_file("small.py", HELPERS) and len(index) > 0
    for i in range(500):  # replacing files many times: removed chunks leave the postings in time
        index.set_file("small.py", HELPERS.replace("restock", f"restock{i % 3}"))
    ids = {cid for posting in index._postings.values() for cid in posting}
    assert index._dead <= 1000 and len(ids) <= len(index) + index._dead < 1100


def test_files_inside_a_skipped_folder_are_never_indexed_even_by_events(tmp_path):
    (tmp_path / "secrets_dir").mkdir()
    (tmp_path / "app.py").write_text("def visible_helper(): pass\n")
    index = SnippetIndex()
    indexer = WorkspaceIndexer(tmp_path, index, ("secrets_dir",))
    indexer.start()
    try:
        assert indexer.ready.wait(10)
        (tmp_path / "secrets_dir" / "keys.py").write_text("def hidden_helper(): pass\n")
        (tmp_path / "later.py").write_text("def later_visible_helper(): pass\n")
        assert wait_for(lambda: index.query("later_visible_helper()") != [])
        assert index.query("hidden_helper()") == []
        assert not indexer.wanted(tmp_path.resolve() / "secrets_dir" / "keys.py")
    finally:
        indexer.stop()


def test_the_scan_indexes_exactly_the_files_a_full_check_wants(tmp_path):
    """The scan judges only each file's own name (its folders were judged on the way down):
    the result must equal a brute-force check of every file against every folder above it."""
    layout = {
        ".gitignore": "build/\n*.log\n!keep.log\n",
        "app.py": "def app_main(): pass\n",
        "build/gen.py": "def generated(): pass\n",
        "pkg/.gitignore": "local_*\n!local_keep.py\ndeep/skip/\n",
        "pkg/local_a.py": "x = 1\n",
        "pkg/local_keep.py": "x = 2\n",
        "pkg/deep/ok.py": "x = 3\n",
        "pkg/deep/skip/no.py": "x = 4\n",
        "pkg/deep/more/.gitignore": "*.py\n",
        "pkg/deep/more/hidden.py": "x = 5\n",
        "pkg/deep/more/shown.toml": "x = 6\n",
        "vault_secret/cfg.py": "x = 7\n",
        "src/credentials.py": "x = 8\n",
        "src/tool.py": "x = 9\n",
    }
    for rel, text in layout.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    index = SnippetIndex()
    indexer = WorkspaceIndexer(tmp_path, index, ("*secret*", "credentials*"))
    indexer.scan()
    root = tmp_path.resolve()
    brute = {str(p) for p in root.rglob("*") if p.is_file() and indexer.is_source(p) and indexer.wanted(p)}
    assert set(index.sources()) == brute
    assert brute == {
        str(root / r)
        for r in ("app.py", "pkg/local_keep.py", "pkg/deep/ok.py", "pkg/deep/more/shown.toml", "src/tool.py")
    }


def test_reading_files_in_the_workspace_wakes_nothing(tmp_path, monkeypatch):
    """Opens and read-only closes are not watched: a virtual environment under the root is read by every
    import, and on a large tree those events overflowed inotify's queue and kept a core busy for ever."""
    import celeris_lsp.workspace_index as workspace_index

    seen: list[str] = []
    dispatch = workspace_index._Handler.dispatch

    def counting(self, event):
        seen.append(event.event_type)
        dispatch(self, event)

    monkeypatch.setattr(workspace_index._Handler, "dispatch", counting)
    make_workspace(tmp_path)
    indexer = WorkspaceIndexer(tmp_path, SnippetIndex(), ())
    indexer.start()
    try:
        assert indexer.ready.wait(10)
        assert wait_for(lambda: indexer.observer is not None)
        for _ in range(20):
            for path in tmp_path.rglob("*.py"):
                path.read_text()
        (tmp_path / "pkg" / "written.py").write_text("x = 1\n")  # a write is still seen, after the reads
        assert wait_for(lambda: "created" in seen)
        assert not {"opened", "closed_no_write"} & set(seen), seen
    finally:
        indexer.stop()


def test_snippets_come_only_from_files_of_the_documents_family():
    index = SnippetIndex()
    body = "def total_price(order_items, discount_rate):\n    return sum(order_items) * discount_rate\n"
    index.set_file("shop/prices.py", body)
    index.set_file("web/prices.go", "func total_price(order_items []int, discount_rate int) int {\n"
                                     "\treturn order_items[0] * discount_rate\n}\n")  # fmt: skip
    query = "x = total_price(order_items, discount_rate)"
    assert {s.source for s in index.query(query)} == {"shop/prices.py", "web/prices.go"}
    assert [s.source for s in index.query(query, family="python")] == ["shop/prices.py"]
    assert [s.source for s in index.query(query, family="go")] == ["web/prices.go"]
    assert index.query(query, family="rust") == []
