"""The next-edit prompt that Inception's Mercury Edit reads (and ``serve``'s ``/v1/edit/completions``):
tagged sections in one user message, the answer the editable region rewritten, in a fenced block.

    <|recently_viewed_code_snippets|> ... <|/recently_viewed_code_snippets|>
    <|current_file_content|>
    current_file_path: PATH
    TEXT BEFORE THE REGION<|code_to_edit|>
    THE REGION, WITH <|cursor|> WHERE THE CURSOR IS
    <|/code_to_edit|>TEXT AFTER THE REGION
    <|/current_file_content|>
    <|edit_diff_history|>
    UNIFIED DIFFS OF THE RECENT EDITS, THE LATEST LAST
    <|/edit_diff_history|>

``read`` takes such a message apart; ``history_of`` turns its latest diff into an ``EditHistory`` of the
file as it is now (where the diff's new lines are found in it); ``write`` builds one (the remote tier's
request) with ``diffs_of`` a history; ``fenced``/``unfenced`` wrap and unwrap the answer."""

from __future__ import annotations

import re
from dataclasses import dataclass

from celeris_complete.edits.history import EditHistory

SNIPPETS = ("<|recently_viewed_code_snippets|>", "<|/recently_viewed_code_snippets|>")
FILE = ("<|current_file_content|>", "<|/current_file_content|>")
REGION = ("<|code_to_edit|>", "<|/code_to_edit|>")
HISTORY = ("<|edit_diff_history|>", "<|/edit_diff_history|>")
CURSOR = "<|cursor|>"
PATH = "current_file_path:"
HUNK_COUNTS = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass
class EditPrompt:
    path: str
    before: str  # the file's text before the editable region
    region: str  # the editable region (the cursor marker taken out)
    after: str
    cursor: int | None  # offset of the cursor in ``region``
    diffs: str  # the edit history's unified diffs, as sent

    @property
    def text(self) -> str:
        return self.before + self.region + self.after


def between(text: str, tags: tuple[str, str]) -> str | None:
    start = text.find(tags[0])
    if start < 0:
        return None
    end = text.find(tags[1], start + len(tags[0]))
    return None if end < 0 else text[start + len(tags[0]) : end]


def read(message: str) -> EditPrompt:
    """The sections of a next-edit prompt; ValueError naming what is missing."""
    content = between(message, FILE)
    if content is None:
        raise ValueError(f"the message has no {FILE[0]} ... {FILE[1]} section")
    content = content.removeprefix("\n")
    path = ""
    if content.startswith(PATH):
        first, _, content = content.partition("\n")
        path = first[len(PATH) :].strip()
    start, end = content.find(REGION[0]), content.find(REGION[1])
    if start < 0 or end < start:
        raise ValueError(f"the current file has no {REGION[0]} ... {REGION[1]} region")
    region = content[start + len(REGION[0]) : end].removeprefix("\n")
    cursor = region.find(CURSOR)
    region = region.replace(CURSOR, "")
    after = content[end + len(REGION[1]) :].removesuffix("\n")
    return EditPrompt(path, content[:start], region, after, cursor if cursor >= 0 else None,
                      between(message, HISTORY) or "")  # fmt: skip


def write(path: str, text: str, lo: int, hi: int, cursor: int, diffs: str) -> str:
    """A prompt for ``text`` with the editable region ``text[lo:hi]`` and the cursor at offset ``cursor``
    (within the region)."""
    region = text[lo:cursor] + CURSOR + text[cursor:hi]
    return (f"{SNIPPETS[0]}\n\n{SNIPPETS[1]}\n{FILE[0]}\n{PATH} {path}\n{text[:lo]}{REGION[0]}\n{region}"
            f"{REGION[1]}{text[hi:]}\n{FILE[1]}\n{HISTORY[0]}\n{diffs}\n{HISTORY[1]}")  # fmt: skip


def last_hunk(diffs: str) -> tuple[list[str], list[str]] | None:
    """The latest hunk's lines before and after (context lines in both), each with its line break."""
    hunks: list[tuple[list[str], list[str]]] = []
    old_left = new_left = 0  # the hunk's lines still to read (its header counts them)
    for line in diffs.splitlines(keepends=True):
        if m := HUNK_COUNTS.match(line):
            hunks.append(([], []))
            old_left, new_left = int(m.group(1) or 1), int(m.group(2) or 1)
            continue
        if not (old_left or new_left) or line[:1] not in (" ", "-", "+"):
            continue
        old, new = hunks[-1]
        body = line[1:] if line.endswith("\n") else line[1:] + "\n"
        if line[0] != "+" and old_left:
            old.append(body)
            old_left -= 1
        if line[0] != "-" and new_left:
            new.append(body)
            new_left -= 1
    return hunks[-1] if hunks else None


def history_of(prompt: EditPrompt) -> tuple[list[str], EditHistory] | None:
    """The file's lines now and a history holding the latest diff, found where its new lines are in the
    file (the place nearest the cursor); None when there is no diff or its lines are not in the file."""
    hunk = last_hunk(prompt.diffs)
    if hunk is None:
        return None
    old, new = hunk
    lines = prompt.text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    n = len(new)
    if n == 0 or old == new:
        return None
    at = [i for i in range(len(lines) - n + 1) if lines[i : i + n] == new]
    if not at:
        return None
    cursor_line = prompt.before.count("\n") + prompt.region[: prompt.cursor or 0].count("\n")
    i = min(at, key=lambda k: abs(k - cursor_line))
    previous = lines[:i] + old + lines[i + n :]
    history = EditHistory()
    history.record(previous, i, i + max(len(old), 1) - 1, n if old else n + 1)
    return lines, history


def fenced(text: str) -> str:
    return f"```\n{text}\n```" if not text.endswith("\n") else f"```\n{text}```"


def unfenced(answer: str) -> str | None:
    """The text in an answer's first fenced block (its language tag dropped), or None."""
    m = re.search(r"```[^\n]*\n(.*?)```", answer, re.S)
    return None if m is None else m.group(1)


def diffs_of(history: EditHistory, lines, path: str) -> str:
    """The history's edits as unified diffs, the latest last (an edit too big to be a pattern is left out:
    its text is not kept)."""
    out = []
    for e in history.edits:
        if e.big:
            continue
        old = e.before.splitlines(keepends=True)
        new = list(lines[e.line : e.line + e.count])
        if old == new:
            continue
        body = [f"-{line}" if line.endswith("\n") else f"-{line}\n" for line in old]
        body += [f"+{line}" if line.endswith("\n") else f"+{line}\n" for line in new]
        header = f"--- a/{path}\n+++ b/{path}\n@@ -{e.line + 1},{len(old)} +{e.line + 1},{len(new)} @@\n"
        out.append(header + "".join(body))
    return "".join(out).rstrip("\n")
