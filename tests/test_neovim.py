"""The Neovim plugin in a real, headless Neovim 0.12, against the real server and the shipped model."""

from __future__ import annotations

import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pynvim
import pytest

from tests.conftest import REPO
from tests.second_tier import SecondTier

NVIM = Path(sys.executable).parent / "nvim"
PLUGIN = REPO / "editor_plugins" / "neovim"
NS = "nvim.lsp.inline_completion"


def wait_for(check, timeout=60.0, interval=0.05):
    end = time.time() + timeout
    while time.time() < end:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not met in time")


def open_in_nvim(model_dir: Path, path: Path, filetype: str | list[str], mode: str, extra: dict | None = None):
    """Neovim with the plugin for ``filetype`` (or several, one server for them all), editing ``path``; the
    server's settings: ``mode``, and ``extra``."""
    if not NVIM.exists():
        pytest.fail(f"Neovim is missing from the environment ({NVIM}); `make test` installs it")
    vim = pynvim.attach("child", argv=[str(NVIM), "--embed", "--headless", "--clean", "-n"])
    vim.exec_lua(
        """
        local plugin, python, model, filetype, mode, extra = ...
        vim.opt.runtimepath:prepend(plugin)
        vim.cmd("runtime plugin/celeris.lua")
        vim.o.expandtab = false
        require("celeris").setup({
          cmd = { python, "-m", "celeris_complete.cli", "lsp" },
          filetypes = type(filetype) == "table" and filetype or { filetype },
          -- A high end-of-span penalty keeps the suggestions non-empty: these tests check mechanics.
          settings = vim.tbl_extend("force", { model = model, mode = mode, eos_penalty = 8.0,
            max_chars_after_cursor = 10, min_confidence = 0 }, extra),
        })
        """,
        str(PLUGIN),
        sys.executable,
        str(model_dir),
        filetype,
        mode,
        extra or {},
    )
    vim.command(f"edit {path}")
    wait_for(lambda: vim.exec_lua('return #vim.lsp.get_clients({name = "celeris"})') > 0)
    wait_for(
        lambda: vim.exec_lua(
            'local c = vim.lsp.get_clients({name = "celeris"})[1]\n'
            'local r = c:request_sync("celeris/status", {}, 5000, 0)\n'
            "return r and r.result and r.result.ready and r.result.model_loaded"
        ),
        timeout=120,
    )
    return vim


# One Neovim (and so one server) per kind of editing, shared by the tests of this file: each test edits a
# file of its own in a fresh buffer, and what a test changed in the editor is put back after it.
class Editor:
    def __init__(self, vim, folder: Path) -> None:
        self.vim, self.folder, self.files = vim, folder, 0

    def edit(self, name: str, text: str):
        """``text`` in a new file ``name``, in a fresh buffer the server is attached to."""
        self.files += 1
        path = self.folder / f"{self.files}-{name}"
        path.write_text(text)
        self.vim.command(f"edit {path}")
        wait_for(lambda: self.vim.exec_lua('return #vim.lsp.get_clients({bufnr = 0, name = "celeris"})') > 0)
        return self.vim

    def reset(self) -> None:
        """Back to normal mode, suggestions on, one window, no buffers, no messages."""
        self.vim.input("<Esc>")
        self.vim.exec_lua('local c = require("celeris"); if not c.enabled then c.toggle() end')
        self.vim.command("silent! tabonly! | silent! only! | silent! %bwipeout! | messages clear")


@contextmanager
def shared_editor(model_dir: Path, folder: Path, filetype: str | list[str], mode: str, first: str, text: str = "\n"):
    """An Editor for the tests of a module, started on the file ``first`` (holding ``text``)."""
    (folder / first).write_text(text)
    editor = Editor(open_in_nvim(model_dir, folder / first, filetype, mode), folder)
    try:
        yield editor
    finally:
        editor.vim.close()


@pytest.fixture(scope="module")
def python_editor(shipped_model_dir, tmp_path_factory):
    with shared_editor(
        shipped_model_dir, tmp_path_factory.mktemp("nvim-python"), "python", "line", "start.py"
    ) as editor:
        yield editor


@pytest.fixture
def nvim(python_editor):
    yield python_editor.edit("example.py", "def add(first, second):\n    total = first + second\n    return \n")
    python_editor.reset()


# A plain-text file (no compiler's check) in block mode, where the shipped model suggests two lines, the
# first of several words, after "def " on line 6 (when written: "main() -> None:", then a line of commas).
BLOCK_TEXT = "def add(first, second):\n    total = first + second\n    return total\n\n\ndef\n"


@pytest.fixture(scope="module")
def text_editor(shipped_model_dir, tmp_path_factory):
    with shared_editor(shipped_model_dir, tmp_path_factory.mktemp("nvim-text"), "text", "block", "start.txt") as editor:
        yield editor


@pytest.fixture
def nvim_block(text_editor):
    yield text_editor.edit("example.txt", BLOCK_TEXT)
    text_editor.reset()


def ghost(vim) -> str:
    """The ghost text Neovim shows (first line only), or ''."""
    return vim.exec_lua(
        """
        local ns = vim.api.nvim_create_namespace(...)
        local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })
        if #marks == 0 then return "" end
        local parts = {}
        for _, chunk in ipairs(marks[1][4].virt_text or {}) do table.insert(parts, chunk[1]) end
        return table.concat(parts)
        """,
        NS,
    )


def suggestion(vim) -> str:
    """The whole suggestion Neovim shows: its first line and the lines below it, or ''."""
    return vim.exec_lua(
        """
        local ns = vim.api.nvim_create_namespace(...)
        local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })
        if #marks == 0 then return "" end
        local function text(chunks)
          local parts = {}
          for _, chunk in ipairs(chunks or {}) do table.insert(parts, chunk[1]) end
          return table.concat(parts)
        end
        local lines = { text(marks[1][4].virt_text) }
        for _, virt_line in ipairs(marks[1][4].virt_lines or {}) do table.insert(lines, text(virt_line)) end
        return table.concat(lines, "\\n")
        """,
        NS,
    )


def line(vim, n=3) -> str:
    return vim.call("getline", n)


def type_after_def(vim) -> tuple[str, str]:
    """Type a space after "def" on line 6: (the suggestion shown, its first line); it must have lines
    after the first, and words after the first, for the tests to tell their keys apart."""
    vim.call("cursor", 6, 1)
    vim.input("A ")
    shown = wait_for(lambda: suggestion(vim))
    first = shown.split("\n")[0]
    assert "\n" in shown and first.strip() and shown.split("\n", 1)[1].strip(), f"not two lines: {shown!r}"
    assert len(re.findall(r"\w+|[^\w\s]+", first)) >= 2, f"not several words: {first!r}"
    return shown, first


def type_at_end_of_return(vim, text="t"):
    vim.call("cursor", 3, 1)
    vim.input("A" + text)
    return wait_for(lambda: ghost(vim))


def test_ghost_text_appears_and_accept_inserts_it(nvim):
    shown = type_at_end_of_return(nvim)
    assert shown.strip()
    nvim.input("<Tab>")
    wait_for(lambda: line(nvim) != "    return t")
    assert line(nvim) == "    return t" + shown
    assert "Error" not in nvim.api.exec2("messages", {"output": True})["output"]


def test_accept_word(nvim_block):
    shown, first = type_after_def(nvim_block)
    before = nvim_block.call("getline", 1, "$")
    nvim_block.input("<M-w>")
    wait_for(lambda: line(nvim_block, 6) != "def ")
    # The first word (letters, digits and _; else a run of other signs), with the blanks before it.
    word = re.match(r"\s*(\w+|[^\w\s]+)", first).group(0)
    assert nvim_block.call("getline", 1, "$") == [*before[:5], "def " + word, *before[6:]], shown


def test_dismiss_clears_the_ghost_text(nvim):
    type_at_end_of_return(nvim)
    nvim.input("<C-]>")
    wait_for(lambda: not ghost(nvim), timeout=5)
    assert line(nvim) == "    return t"


def test_accept_line_inserts_the_first_line(nvim_block):
    shown, first = type_after_def(nvim_block)
    before = nvim_block.call("getline", 1, "$")
    nvim_block.input("<C-l>")
    wait_for(lambda: line(nvim_block, 6) != "def ")
    # The first line only: no line is added below it.
    assert nvim_block.call("getline", 1, "$") == [*before[:5], "def " + first, *before[6:]], shown


def test_typing_through_keeps_the_suggestion_consistent(nvim):
    shown = type_at_end_of_return(nvim)
    assert len(shown) >= 2, shown  # the high end-of-span penalty makes suggestions longer than this
    nvim.input(shown[0] if shown[0] != "<" else "<lt>")
    wait_for(lambda: ghost(nvim) == shown[1:], timeout=30)


def test_tab_falls_back_when_nothing_is_shown(nvim):
    nvim.exec_lua('require("celeris").toggle()')  # off: nothing will be suggested
    nvim.call("cursor", 1, 1)
    nvim.input("O<Tab>")
    # A tab, or the spaces Python's filetype settings turn it into: the key did what it did before.
    wait_for(lambda: nvim.call("getline", 1) in ("\t", "    "), timeout=10)


def test_health_and_statusline(nvim):
    type_at_end_of_return(nvim)
    assert nvim.exec_lua('return require("celeris").statusline()').startswith("celeris ")
    health = nvim.exec_lua(
        'vim.cmd("checkhealth celeris"); return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\\n")'
    )
    assert "server command found" in health or "model loads" in health


def test_the_second_tiers_answer_is_shown_when_it_comes_and_the_statusline_says_so(shipped_model_dir, tmp_path):
    """min_confidence 1: the local answer stays quiet; the tier's comes later (celeris/escalated), and the
    plugin asks again where the cursor still is."""
    path = tmp_path / "example.py"
    path.write_text("def add(first, second):\n    total = first + second\n    return \n")
    provider, url = SecondTier.start()
    vim = open_in_nvim(shipped_model_dir, path, "python", "line", {"min_confidence": 1.0, "escalate_endpoint": url})
    try:
        assert type_at_end_of_return(vim) == SecondTier.TEXT
        assert vim.exec_lua('return require("celeris").statusline()').endswith(" tier2")
        vim.input("<Tab>")
        wait_for(lambda: line(vim) != "    return t")
        assert line(vim) == "    return t" + SecondTier.TEXT
    finally:
        vim.close()
        provider.shutdown()


# Other languages: the same plugin on a Go and a TypeScript file; the line to finish repeats one above,
# which the document's drafts offer and the language's parser passes.
OTHER_LANGUAGES = {
    "go": ("example.go", "package demo\n\nfunc add(first int, second int) int {\n\ttotal := first + second\n"
           "\treturn total\n}\n\nfunc sub(first int, second int) int {\n\ttotal := first - second\n\treturn \n}\n",
           10, "\treturn total"),
    "typescript": ("example.ts", "export function add(first: number, second: number): number {\n"
                   "  const total = first + second;\n  return total;\n}\n\n"
                   "export function sub(first: number, second: number): number {\n"
                   "  const total = first - second;\n  return \n}\n", 8, "  return total;"),
}  # fmt: skip


@pytest.fixture(scope="module")
def other_editor(shipped_model_dir, tmp_path_factory):
    """One Neovim, and one server, for both languages' files."""
    folder = tmp_path_factory.mktemp("nvim-other")
    with shared_editor(
        shipped_model_dir, folder, sorted(OTHER_LANGUAGES), "line", "start.go", "package demo\n"
    ) as editor:
        yield editor


@pytest.mark.parametrize("filetype", sorted(OTHER_LANGUAGES))
def test_other_languages_get_ghost_text_in_their_own_syntax(other_editor, filetype):
    name, text, row, expected = OTHER_LANGUAGES[filetype]
    vim = other_editor.edit(name, text)
    try:
        assert vim.eval("&filetype") == filetype
        vim.call("cursor", row, 1)
        vim.input("At")
        shown = wait_for(lambda: ghost(vim))
        vim.input("<Tab>")
        wait_for(lambda: line(vim, row) != expected[: expected.index("return") + 7] + "t")
        assert line(vim, row) == expected, (shown, line(vim, row))
        assert "Error" not in vim.api.exec2("messages", {"output": True})["output"]
    finally:
        other_editor.reset()


def next_edit_marks(vim) -> list:
    """The next edit Neovim shows: (row, col, end_row, end_col, the new text shown inline)."""
    return vim.exec_lua(
        """
        local ns = vim.api.nvim_create_namespace("celeris.next_edit")
        local out = {}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
          local d = m[4]
          if d.virt_text_pos == "inline" then
            table.insert(out, { m[2], m[3], d.end_row, d.end_col, d.virt_text[1][1] })
          end
        end
        return out
        """
    )


def test_a_rename_is_suggested_where_it_applies_next_jumped_to_and_accepted(python_editor):
    vim = python_editor.edit(
        "rename.py", "def area(width, height):\n    size = width * height\n    print(size)\n    return size + 1\n"
    )
    try:
        vim.command("normal! 2G5|cwtotal")  # "size" -> "total" on line 2, in normal mode
        marks = wait_for(lambda: next_edit_marks(vim), timeout=30)
        # Line 3's "size" struck through, "total" beside it (the first of the lines the rename reaches).
        assert marks[0] == [2, 10, 2, 14, "total"]
        vim.input("<M-n>")  # jump there
        wait_for(lambda: tuple(vim.current.window.cursor) == (3, 10), timeout=10)
        vim.input("<M-y>")  # accept
        wait_for(lambda: vim.current.buffer[:] == [
            "def area(width, height):", "    total = width * height", "    print(total)", "    return total + 1",
        ], timeout=10)  # fmt: skip
        # Nothing is left to rename: the suggestion after the accepted one is none.
        time.sleep(0.5)
        assert wait_for(lambda: vim.exec_lua("return require('celeris').next_edit.current() == nil"), timeout=10)
    finally:
        python_editor.reset()
