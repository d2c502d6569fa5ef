"""``celeris/nextEdit``: after the user's edits, the next one (``celeris_complete.edits``), as an LSP
edit of the document as it is now.

Request ``{"textDocument": {"uri"}, "position"}``; result ``null`` or ``{"edits": [{"range",
"newText"}], "kind", "remaining", "version"}``: the next change, on one line or a few consecutive ones,
as one edit per line cut to the characters that change (so an editor shows just them), ranges in the
negotiated position encoding; ``kind`` says how it was found
(``rename``, ``repeat``, ``call``, or ``remote``: the ``edit_endpoint``'s, asked where propagation
finds nothing, or always with ``next_edit_local`` off), ``remaining`` how many more lines the same change applies to,
``version`` the document's version it was computed on.

The prediction runs on a thread of its own, on a snapshot of the document taken on the message loop
(its text and line starts are replaced, never changed, by an edit; the history is copied), so neither
inline completions nor the document's changes wait for it; a result for a version the document has
left is dropped (null)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
from pygls.workspace.position_codec import ServerTextPosition

from celeris_complete.edits.history import EditHistory
from celeris_complete.edits.prompt import diffs_of, write
from celeris_complete.edits.propagate import Suggestion, suggest

from .document import FastDocument, Lines

NEXT_EDIT_REQUEST = "celeris/nextEdit"
CAPABILITY = {"nextEdit": {"kinds": ["rename", "repeat", "call"]}}


@dataclass
class Snapshot:
    text: str
    starts: np.ndarray
    history: EditHistory
    version: int | None


def snapshot(doc: FastDocument) -> Snapshot | None:
    """What a prediction reads, taken on the message loop; None before the document's first change."""
    if doc.history is None or not doc.history.edits:
        return None
    return Snapshot(doc.source, doc.starts, copy.deepcopy(doc.history), doc.version)


def predict(snap: Snapshot, cursor_line: int | None) -> Suggestion | None:
    """The next edit (off the message loop)."""
    lines = Lines(snap.text, snap.starts)
    cursor = None if cursor_line is None else min(cursor_line, max(len(lines) - 1, 0))
    return suggest(lines, snap.history, cursor)


def as_result(doc: FastDocument, snap: Snapshot, found: Suggestion | None) -> dict | None:
    """The LSP result for ``found`` in ``doc`` (null where the document changed since ``snap``)."""
    if found is None or doc.version != snap.version or doc.source is not snap.text:
        return None
    edits = []
    olds, news = found.old.splitlines(keepends=True), found.new.splitlines(keepends=True)
    for i, (old, new) in enumerate(zip(olds, news)):  # (a suggestion rewrites lines one for one)
        if old == new:
            continue
        start = int(doc.starts[found.first + i])
        p = common_prefix(old, new)
        s = common_prefix(old[p:][::-1], new[p:][::-1])
        lo, hi = start + p, start + len(old) - s
        rng = {"start": position_of(doc, lo), "end": position_of(doc, hi)}
        edits.append({"range": rng, "newText": new[p : len(new) - s]})
    return {"edits": edits, "kind": found.kind, "remaining": found.remaining, "version": doc.version}


REGION_ABOVE, REGION_BELOW = 5, 10  # the editable region an edit endpoint rewrites, in lines around the cursor
FILE_AROUND = 300  # lines of the file sent around the region


def remote_prompt(snap: Snapshot, line: int, character: int, path: str) -> tuple[str, int, int]:
    """(the next-edit prompt for an edit endpoint, the region's start and end offsets in ``snap.text``):
    the file around the cursor, the lines near it as the editable region, the history as diffs."""
    lines = Lines(snap.text, snap.starts)
    n = len(lines)
    line = min(max(line, 0), max(n - 1, 0))
    first, last = max(0, line - REGION_ABOVE), min(n, line + REGION_BELOW + 1)
    offset = lambda i: int(snap.starts[i]) if i < len(snap.starts) else len(snap.text)  # noqa: E731
    lo, hi = offset(first), offset(last)
    w_lo, w_hi = offset(max(0, first - FILE_AROUND)), offset(min(n, last + FILE_AROUND))
    cursor = min(offset(line) + max(character, 0), len(lines[line].rstrip("\r\n")) + offset(line)) if n else 0
    cursor = min(max(cursor, lo), hi)
    text = snap.text[w_lo:w_hi]
    prompt = write(path, text, lo - w_lo, hi - w_lo, cursor - w_lo, diffs_of(snap.history, lines, path))
    return prompt, lo, hi


def remote_result(doc: FastDocument, snap: Snapshot, lo: int, hi: int, region: str) -> dict | None:
    """The LSP result for an edit endpoint's rewrite of ``snap.text[lo:hi]`` (null: unchanged, or the
    document changed since), one edit cut to what changes."""
    if doc.version != snap.version or doc.source is not snap.text:
        return None
    old = snap.text[lo:hi]
    if region == old or region.rstrip("\n") == old.rstrip("\n"):
        return None
    p = common_prefix(old, region)
    s = common_prefix(old[p:][::-1], region[p:][::-1])
    rng = {"start": position_of(doc, lo + p), "end": position_of(doc, hi - s)}
    edit = {"range": rng, "newText": region[p : len(region) - s]}
    return {"edits": [edit], "kind": "remote", "remaining": 0, "version": doc.version}


def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def position_of(doc: FastDocument, offset: int) -> dict:
    line = doc.line_of_offset(offset)
    pos = doc.position_to_client_units(ServerTextPosition(line, offset - int(doc.starts[line])))
    return {"line": pos.line, "character": pos.character}
