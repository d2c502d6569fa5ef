"""End-to-end: snippets from other open documents and from workspace files reach the model's context."""

import asyncio

from lsprotocol import types

from tests.lsp_session import Session, run
from tests.test_lsp import field
from tests.test_snippets import HELPERS, make_workspace

MAIN = "from pkg.helpers import load_inventory, restock_warehouse\n\ninv = load_inventory('stock.json')\nrestock_"


async def wait_indexed(s: Session, files: int) -> dict:
    for _ in range(200):
        status = await s.status()
        index = field(status, "snippet_index")
        if field(index, "ready") and field(index, "files") >= files:
            return index
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the workspace was not indexed: {index}")


def last_snippets(s: Session) -> list[str]:
    timings = [t for t in s.timings if field(t, "source") == "model"]
    assert timings, "no model call was reported"
    return [field(x, "source") for x in field(timings[-1], "snippets")], field(timings[-1], "snippet_tokens")


def test_workspace_files_give_snippets_but_never_ignored_or_secret_ones(tmp_path, shipped_model_dir):
    make_workspace(tmp_path)
    main = tmp_path / "main.py"
    main.write_text(MAIN)

    async def scenario():
        s = Session(shipped_model_dir, folders=[tmp_path], init_options={"mode": "line"})
        await s.start()
        await wait_indexed(s, 3)
        s.open(main.as_uri(), MAIN)
        await s.inline(main.as_uri(), 3, 8, invoked=True)
        sources, used = last_snippets(s)
        pkg = (tmp_path / "pkg").resolve()
        assert sources[0] == str(pkg / "helpers.py"), sources
        assert set(sources) <= {str(pkg / "helpers.py"), str(pkg / "local_keep.py")}  # never ignored ones
        assert used > 8
        # A file written after start is picked up by the watcher; a secret written alongside never is.
        (tmp_path / ".env").write_text("restock_everything=1\n")
        (tmp_path / "pkg" / "stock.py").write_text("def restock_everything(inv, supplier): return inv\n")
        await wait_indexed(s, 4)
        s.insert(main.as_uri(), 3, 8, "\ninv2 = restock_everything(inv)\n")
        await s.inline(main.as_uri(), 5, 0, invoked=True)
        sources, _ = last_snippets(s)
        assert str((tmp_path / "pkg" / "stock.py").resolve()) in sources, sources
        status = await s.status()
        assert field(field(status, "snippet_index"), "files") == 4  # main, helpers, local_keep, stock: never .env
        await s.stop()

    run(scenario())


def test_other_open_documents_give_snippets_without_a_workspace(tmp_path, shipped_model_dir):
    async def scenario():
        s = Session(shipped_model_dir, init_options={"mode": "line"})
        await s.start()
        s.open("file:///elsewhere/helpers.py", HELPERS)
        s.open("file:///elsewhere/.env", HELPERS)  # secret: never a snippet
        s.open("file:///elsewhere/main.py", MAIN)
        await s.inline("file:///elsewhere/main.py", 3, 8, invoked=True)
        sources, used = last_snippets(s)
        assert sources == ["/elsewhere/helpers.py"] and used > 8
        s.close("file:///elsewhere/helpers.py")
        s.insert("file:///elsewhere/main.py", 3, 8, "\n")
        await s.inline("file:///elsewhere/main.py", 4, 0, invoked=True)
        assert last_snippets(s)[0] == []
        await s.stop()

    run(scenario())


def test_snippets_off_when_the_budget_is_zero(tmp_path, shipped_model_dir):
    make_workspace(tmp_path)

    async def scenario():
        # (with drafts on, the workspace is still indexed for their line table)
        options = {"mode": "line", "snippet_tokens": 0, "drafts": False}
        s = Session(shipped_model_dir, folders=[tmp_path], init_options=options)
        await s.start()
        s.open("file:///elsewhere/helpers.py", HELPERS)
        s.open("file:///elsewhere/main.py", MAIN)
        await s.inline("file:///elsewhere/main.py", 3, 8, invoked=True)
        assert last_snippets(s) == ([], 0)
        assert field(field(await s.status(), "snippet_index"), "folders") == []
        await s.stop()

    run(scenario())


def test_new_secret_globs_apply_to_the_workspace_and_remote_code_is_never_allowed_by_the_editor(
    tmp_path, shipped_model_dir
):
    make_workspace(tmp_path)

    async def scenario():
        s = Session(shipped_model_dir, folders=[tmp_path], init_options={"trust_remote_code": True})
        await s.start()
        status = await s.status()
        assert field(field(status, "settings"), "trust_remote_code") is False
        assert any("trust_remote_code is ignored" in m.message for m in s.messages)
        await wait_indexed(s, 2)  # helpers.py, local_keep.py
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"secret_globs": ["*helpers*", ".env"]})
        )
        for _ in range(100):
            index = field(await s.status(), "snippet_index")
            if field(index, "ready") and field(index, "files") == 1:  # local_keep.py only
                break
            await asyncio.sleep(0.05)
        assert field(index, "files") == 1, index
        await s.stop()

    run(scenario())


def test_a_workspace_line_becomes_the_draft_the_server_answers_with(tmp_path, shipped_model_dir):
    line = "    conn = psycopg_pool.connect(dsn, timeout=settings.DB_TIMEOUT)\n"
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(f"def open_{name[0]}(dsn):\n{line}    return conn\n")
    text = "def open_c(dsn):\n    conn = psycopg_pool.conn"
    uri = (tmp_path / "c.py").as_uri()

    async def ask(**settings):
        options = {"mode": "line", "min_confidence": 0.0, **settings}  # drafts here, not staying quiet
        s = Session(shipped_model_dir, folders=[tmp_path], init_options=options)
        await s.start()
        await wait_indexed(s, 2)
        s.open(uri, text)
        answer = await s.inline(uri, 1, len("    conn = psycopg_pool.conn"))
        timings = [t for t in s.timings if field(t, "source") == "model"][-1]
        await s.stop()
        return answer.items[0].insert_text if answer.items else "", field(timings, "draft")

    got, draft = run(ask())  # the defaults: drafts on, taken unless the rules forbid a token
    assert got.endswith("ect(dsn, timeout=settings.DB_TIMEOUT)"), got
    assert field(draft, "source") == "workspace" and field(draft, "votes") == 2
    assert field(draft, "kept") == field(draft, "tokens") > 5
    _, draft = run(ask(draft_threshold=0.999))  # a model this small is never that sure: refused
    assert field(draft, "kept") < field(draft, "tokens")
    _, draft = run(ask(drafts=False))
    assert draft is None


def test_drafts_never_come_from_secret_or_ignored_files_and_the_typing_cache_gives_one(tmp_path, shipped_model_dir):
    leak = "    token = vault_client.read_secret(path='prod/api', version=7)\n"
    (tmp_path / "secret_config.py").write_text(f"def a():\n{leak}")  # secret_globs: *secret*
    (tmp_path / "generated_x.py").write_text(f"def b():\n{leak}")  # ignore_globs below
    (tmp_path / ".gitignore").write_text("built.py\n")
    (tmp_path / "built.py").write_text(f"def c():\n{leak}")
    (tmp_path / "ok.py").write_text("def d():\n    session = db_pool.acquire(timeout=30, retries=5)\n")
    uri = (tmp_path / "main.py").as_uri()

    async def scenario():
        options = {"mode": "line", "ignore_globs": ["*generated_*"], "min_confidence": 0.0}
        s = Session(shipped_model_dir, folders=[tmp_path], init_options=options)
        await s.start()
        await wait_indexed(s, 1)
        s.open((tmp_path / "secret_config.py").as_uri(), f"def a():\n{leak}")  # open in the editor too
        text = "def main():\n    token = vault_client.read_\n    session = db_pool.acq\n"
        s.open(uri, text)

        async def ask(line: int, col: int) -> tuple[str, dict | None]:
            answer = await s.inline(uri, line, col)
            timings = [t for t in s.timings if field(t, "source") == "model"][-1]
            return (answer.items[0].insert_text if answer.items else ""), field(timings, "draft")

        got, draft = await ask(1, len("    token = vault_client.read_"))
        assert draft is None and "prod/api" not in got, (got, draft)
        got, draft = await ask(2, len("    session = db_pool.acq"))  # the control: a file indexed as usual
        assert field(draft, "source") == "workspace" and got.startswith("uire(timeout=30"), (got, draft)
        s.insert(uri, 2, len("    session = db_pool.acq"), " + 1")  # the text after the cursor changes
        _, draft = await ask(2, len("    session = db_pool.acq"))
        assert field(draft, "source") == "typing-cache", draft  # the answer shown a moment ago, verified
        await s.stop()

    run(scenario())
