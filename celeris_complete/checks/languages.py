"""The languages a document can be in, and the guard that keeps Python out of the others.

``resolve`` reads a language from what the editor says (an LSP language id or a Neovim filetype) or from
a file's name or URI.  ``foreign`` says whether an answer for a document in another language has a
form only Python has (``def``, ``elif``, ``except``, ``from x import y``, ``import x`` alone on its line,
triple quotes, ``self.``, ``None``/``True``/``False``, a statement that opens a block with ``:``): the
model, trained on Python so far, writes those where it does not know the language, and an answer
with one is never right there.  Each rule leaves out the languages where the form is at home (Rust's
``None`` and ``self.``, Lua's ``self.``, the shell's ``elif``, Java's text blocks and imports).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    name: str
    family: str  # languages whose files may serve one another (TypeScript and JavaScript: "js")
    ids: tuple[str, ...]  # LSP language ids and Neovim filetypes
    suffixes: tuple[str, ...]
    # "model": the model's answer (checked where a compiler or parser can); "drafts": only a line from the
    # document or the workspace that the model accepted whole (markup and data: the model writes code).
    policy: str = "model"


LANGUAGES: tuple[Language, ...] = (
    Language("python", "python", ("python", "py", "pyi"), (".py", ".pyi", ".pyw")),
    Language("typescript", "js", ("typescript", "typescriptreact", "ts", "tsx"), (".ts", ".mts", ".cts", ".tsx")),
    Language("javascript", "js", ("javascript", "javascriptreact", "js", "jsx"), (".js", ".mjs", ".cjs", ".jsx")),
    Language("go", "go", ("go",), (".go",)),
    Language("rust", "rust", ("rust", "rs"), (".rs",)),
    Language("java", "java", ("java",), (".java",)),
    Language("c", "c", ("c",), (".c", ".h")),
    Language("cpp", "c", ("cpp", "c++", "cuda"), (".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cu")),
    Language("shell", "shell", ("sh", "shellscript", "bash", "zsh"), (".sh", ".bash", ".zsh")),
    Language("lua", "lua", ("lua",), (".lua",)),
    Language("markdown", "markdown", ("markdown", "md"), (".md", ".markdown"), "drafts"),
    Language("html", "html", ("html", "htm"), (".html", ".htm"), "drafts"),
    Language("css", "css", ("css", "scss", "less"), (".css", ".scss", ".less"), "drafts"),
    Language("json", "json", ("json", "jsonc"), (".json", ".jsonc"), "drafts"),
    Language("yaml", "yaml", ("yaml", "yml"), (".yaml", ".yml"), "drafts"),
    Language("toml", "toml", ("toml",), (".toml",), "drafts"),
    Language("xml", "xml", ("xml", "svg"), (".xml", ".svg"), "drafts"),
    Language("restructuredtext", "restructuredtext", ("restructuredtext", "rst"), (".rst",), "drafts"),
)
# Past this many characters the cursor's line is minified or generated: nothing is completed there.
MAX_CURSOR_LINE = 1_000
# Said in a file's first lines by code generators: such a file gets drafts only (nobody writes it by hand).
GENERATED = ("do not edit", "code generated", "@generated", "automatically generated", "auto-generated")
GENERATED_LINES = 12


def policy(language: Language | None, prefix: str, suffix: str, file_start: bool = True) -> str:
    """What a completion may show: "off" (nothing: the cursor's line is longer than ``MAX_CURSOR_LINE``,
    minified or generated), "drafts" (only a line the model accepted whole: the language's policy, or a
    generated file, when ``prefix`` holds the file's start), else "model" (a language not known here too:
    the model's answer, unchecked)."""
    # (Only the last MAX_CURSOR_LINE characters before the cursor and as many after are looked at.)
    start = prefix.rfind("\n", max(0, len(prefix) - MAX_CURSOR_LINE - 1)) + 1
    end = suffix.find("\n", 0, MAX_CURSOR_LINE + 1)
    if len(prefix) - start + (end if end >= 0 else len(suffix)) > MAX_CURSOR_LINE:
        return "off"
    if language is not None and language.policy == "drafts":
        return "drafts"
    if file_start:
        head = prefix[:4000].split("\n", GENERATED_LINES)[:GENERATED_LINES]
        if any(marker in line.lower() for line in head for marker in GENERATED):
            return "drafts"
    return "model"
_BY_ID = {i: lang for lang in LANGUAGES for i in lang.ids}
_BY_SUFFIX = {s: lang for lang in LANGUAGES for s in lang.suffixes}


def resolve(language: str | None) -> Language | None:
    """The language an LSP id, a filetype, a file name, a path or a URI says; None when unknown."""
    if not language:
        return None
    lowered = language.lower()
    if lowered in _BY_ID:
        return _BY_ID[lowered]
    name = lowered.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return _BY_SUFFIX.get(name[dot:]) if dot >= 0 else None


def family_of(source: str | None) -> str | None:
    """The family (``Language.family``) of a file by its name, path or URI: the files that may serve it
    drafts and snippets.  An unknown suffix is a family of its own (``.toml``); no suffix: None."""
    found = resolve(source)
    if found is not None:
        return found.family
    name = (source or "").lower().rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[dot:] if dot > 0 else None


# Forms only Python has: (pattern, the families where the form is at home).  The first group reads
# the lines as they would stand (the cursor's line up to it, then the answer); the second only the
# answer's own code, its comments and quoted strings left out.
_PYTHON_LINES: tuple[tuple[re.Pattern, frozenset[str]], ...] = (
    (re.compile(r"^\s*(def|except|lambda)\b"), frozenset()),
    (re.compile(r"^\s*elif\b"), frozenset({"shell"})),
    (re.compile(r"^\s*from\s+[\w.]+\s+import\b"), frozenset()),
    (re.compile(r"^\s*import\s+[\w.]+(\s+as\s+\w+)?\s*$"), frozenset({"java"})),
    (re.compile(r"^\s*(if|elif|else|for|while|try|finally|with|class)\b[^{;]*:\s*$"), frozenset()),
)
_PYTHON_WORDS: tuple[tuple[re.Pattern, frozenset[str]], ...] = (
    (re.compile(r"\"\"\"|'''"), frozenset({"java"})),
    (re.compile(r"\bself\."), frozenset({"rust", "lua"})),
    (re.compile(r"\bNone\b"), frozenset({"rust"})),
    (re.compile(r"\b(True|False)\b"), frozenset()),
)
_NOT_CODE = re.compile(r"//.*|/\*.*?(\*/|$)|--.*|\"(\\.|[^\"\\\n])*\"|'(\\.|[^'\\\n])*'|`[^`]*`")


def first_foreign_line(language: Language, line_before: str, text: str) -> int | None:
    """The index of the first line of ``text`` (completed after ``line_before``, the cursor's line up to
    it) with a form only Python has, in a document in ``language``; None when there is none (always
    for Python itself)."""
    family = language.family
    if family == "python":
        return None
    for n, line in enumerate(text.split("\n")):
        whole = line_before + line if n == 0 else line
        if any(p.search(whole) for p, home in _PYTHON_LINES if family not in home):
            return n
        if any(p.search(line) for p, home in _PYTHON_WORDS[:1] if family not in home):
            return n
        code = _NOT_CODE.sub(" ", line)
        if any(p.search(code) for p, home in _PYTHON_WORDS[1:] if family not in home):
            return n
    return None


def foreign(language: Language, line_before: str, text: str) -> bool:
    """Whether ``text`` has a form only Python has, in a document in ``language``."""
    return first_foreign_line(language, line_before, text) is not None
