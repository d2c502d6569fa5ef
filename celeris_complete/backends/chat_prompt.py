"""Fill-in-the-middle as a chat: the prompt for a server that offers only OpenAI's chat completions,
how our own server reads such a prompt, and how the completion is taken out of a chat model's reply.

The prompt: a system message that says what to do, and a user message that says how much to write
and holds the code in a fenced block with a marker where the cursor is::

    system: You are a code completion engine. Replace <FILL_HERE> in the user's code. Reply with only
            the code that replaces it: no explanation, no code fences, no surrounding code.
    user:   Fill in <FILL_HERE>: the rest of its line, one line at most.      (line mode)
            Fill in <FILL_HERE>: the missing lines.                          (block mode)

            ```python
            def add(a, b):
                return <FILL_HERE>
            ```

The fence is longer than any run of backticks in the code; where the code holds the marker itself,
the marker is ``<FILL_HERE:xxxxxxxx>`` (a hash of the code).  A reply is read as a chat model writes
it: the first fenced block if there is one, the cursor's line echoed at its start cut off, anything
from the first line after the cursor on cut off, one line in line mode.
"""

from __future__ import annotations

import hashlib
import re

MARKER = "<FILL_HERE>"
MARKERS = (re.compile(r"<FILL_HERE:[0-9a-f]{8}>"), re.compile(re.escape(MARKER)))  # a hashed one first
SYSTEM = (
    "You are a code completion engine. Replace {marker} in the user's code. Reply with only the code that "
    "replaces it: no explanation, no code fences, no surrounding code."
)
LINE_INSTRUCTION = "Fill in {marker}: the rest of its line, one line at most."
BLOCK_INSTRUCTION = "Fill in {marker}: the missing lines."
FENCE = re.compile(r"^(`{3,})[^\n`]*\n(.*?)^\1[ \t]*$", re.DOTALL | re.MULTILINE)
LANGUAGES = {"py": "python", "ts": "typescript", "js": "javascript", "rs": "rust", "go": "go"}


def marker_for(code: str) -> str:
    if MARKER not in code:
        return MARKER
    return f"<FILL_HERE:{hashlib.sha256(code.encode()).hexdigest()[:8]}>"


def fence_for(code: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    return "`" * max(3, longest + 1)


def build(prefix: str, suffix: str, mode: str, language: str | None = None) -> list[dict]:
    """The chat messages that ask for the text between ``prefix`` and ``suffix``."""
    marker = marker_for(prefix + suffix)
    fence = fence_for(prefix + suffix)
    lang = LANGUAGES.get((language or "").lower(), (language or "").lower())
    lang = lang if re.fullmatch(r"[\w+#.-]*", lang) else ""
    instruction = (LINE_INSTRUCTION if mode == "line" else BLOCK_INSTRUCTION).format(marker=marker)
    user = f"{instruction}\n\n{fence}{lang}\n{prefix}{marker}{suffix}\n{fence}"
    return [{"role": "system", "content": SYSTEM.format(marker=marker)}, {"role": "user", "content": user}]


def message_text(content: object) -> str | None:
    """A message's text: a string, or OpenAI's list of parts (the text ones joined); None otherwise."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if all(isinstance(p, str) for p in parts) and parts:
            return "".join(parts)
    return None


def parse(messages: list[dict]) -> tuple[str, str, str | None] | None:
    """(prefix, suffix, mode) from the last user message: the code around its one marker, in a fenced
    block or the message itself (None: no user message with exactly one marker).  The mode is "line"
    when the words before the code ask for one line, else None (the server decides)."""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    text = message_text(users[-1].get("content")) if users else None
    if text is None:
        return None
    pieces = [(m.group(2).removesuffix("\n"), text[: m.start()]) for m in FENCE.finditer(text)]
    for code, words in [*pieces, (text, "")]:
        for pattern in MARKERS:
            found = list(pattern.finditer(code))
            if found:
                break
        if len(found) == 1:
            at = found[0]
            words = words or code[: at.start()]
            mode = "line" if "one line" in words.lower() else None
            return code[: at.start()], code[at.end() :], mode
    return None


def extract(reply: str, prefix: str, suffix: str, mode: str) -> str:
    """The completion in a chat model's reply (see the module doc)."""
    found = FENCE.search(reply)
    text = found.group(2) if found else reply.strip("\n")
    if found and text.endswith("\n"):
        text = text[:-1]
    line = prefix[prefix.rfind("\n") + 1 :]
    if line.strip() and text.startswith(line):  # the model wrote the cursor's line again
        text = text[len(line) :]
    following = next((s for s in suffix.split("\n")[1:] if s.strip()), None)
    if following is not None:
        lines = text.split("\n")
        for i, candidate in enumerate(lines[1:], 1):
            if candidate.strip() == following.strip():
                text = "\n".join(lines[:i])
                break
    if mode == "line":
        text = text.split("\n", 1)[0]
        rest = suffix.split("\n", 1)[0]
        if rest.strip() and text.endswith(rest):
            text = text[: len(text) - len(rest)]
    return text
