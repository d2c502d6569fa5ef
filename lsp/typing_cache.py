"""Typing through a shown completion: answer from what was already predicted, without the model.

When the user types the characters the shown completion predicted, the rest
of it is still the answer; when they delete a few characters, the deleted
text plus the completion is.  Where neither holds, a shown answer for the same line is still a
draft for the model to check (``drafts``).
"""

from __future__ import annotations

from dataclasses import dataclass

from celeris_complete.drafts.table import Draft, line_continuation

LOOK_BACK = 8  # deleted characters still served from the cache


@dataclass
class Shown:
    prefix: str  # the text before the cursor when the completion was computed
    suffix: str
    text: str
    tier: str = "local"  # who answered: "local", or "escalated" (the second tier)


class TypingCache:
    def __init__(self, per_document: int = 4) -> None:
        self.per_document = per_document
        self.entries: dict[str, list[Shown]] = {}
        self.hits = 0
        self.misses = 0

    def store(self, uri: str, prefix: str, suffix: str, text: str, tier: str = "local") -> None:
        if not text:
            return
        entries = self.entries.setdefault(uri, [])
        entries.insert(0, Shown(prefix, suffix, text, tier))
        del entries[self.per_document :]

    def lookup(self, uri: str, prefix: str, suffix: str) -> tuple[str, str] | None:
        """(what is still to insert, the tier that answered), or None."""
        for shown in self.entries.get(uri, ()):
            if suffix != shown.suffix:
                continue
            grown = len(prefix) - len(shown.prefix)
            if 0 <= grown < len(shown.text):
                typed = prefix[len(shown.prefix) :]
                if shown.text.startswith(typed) and prefix.startswith(shown.prefix):
                    self.hits += 1
                    return shown.text[grown:], shown.tier
            elif -LOOK_BACK <= grown < 0 and shown.prefix.startswith(prefix):
                self.hits += 1
                return shown.prefix[len(prefix) :] + shown.text, shown.tier
        self.misses += 1
        return None

    def drafts(self, uri: str, prefix: str) -> list[Draft]:
        """Shown answers whose line starts as the cursor's does, as drafts for the model to verify
        (where ``lookup`` missed: the text after the cursor changed, or the line was typed back further)."""
        out = []
        for shown in self.entries.get(uri, ()):
            rest = line_continuation(shown.prefix, shown.text, prefix)
            if rest:
                out.append(Draft(rest, "typing-cache", 1))
        return out

    def forget(self, uri: str) -> None:
        self.entries.pop(uri, None)
