"""The latest edit's change, proposed where it applies next: the same token-level change (a renamed
name, a repeated textual change) on the nearest other line it matches, below the cursor first, then
above; and a parameter added to a function's definition, carried to its calls.

Each suggestion is one run of consecutive lines rewritten; ``remaining`` counts the other lines the
change still applies to (the editor's next jump).  Only the lines within ``WINDOW`` of the edit are
looked at, and a line is tokenized only when it holds the pattern's longest token, so a suggestion
costs little in a large file."""

from __future__ import annotations

import re
from dataclasses import dataclass

from celeris_complete.edits.change import END, START, Op, apply_ops, ops, tokens
from celeris_complete.edits.history import EditHistory

WINDOW = 2_000  # lines on each side of the edit
CONSTANTS = {"None", "True", "False", "null", "nil", "true", "false", "undefined", "self", "this", "NULL"}
SHAPE = 0.4  # a line at least this like one the edit changed (tokens in common, of all) may take its change
RANK_STEP = 0.5  # among the lines a change applies to, the likest (in steps of this) and then the nearest
MAX_OP_TOKENS, MAX_OP_CHARS = 8, 100  # a change larger than this is a rewrite, not a pattern
DEFINITION = re.compile(r"^\s*(?:async\s+)?(?:def|function|fn|func|pub\s+fn)\s+([A-Za-z_$][\w$]*)\s*[(<]")


@dataclass
class Suggestion:
    """Lines ``first..last`` (inclusive) of the document now, ``old``, become ``new``."""

    first: int
    last: int
    old: str
    new: str
    kind: str  # "rename", "repeat" or "call"
    remaining: int  # other lines the same change still applies to


def suggest(lines: list[str], history: EditHistory, cursor_line: int | None = None) -> Suggestion | None:
    """The next edit after ``history``'s latest one, in ``lines`` (the document's, with their breaks)."""
    latest = history.latest(lines)
    if latest is None:
        return None
    edit, after = latest
    calls = added_parameter(edit.before, after)  # (then the definition's own change is not a pattern)
    if calls is not None:
        kind, tries = "call", [[]]
    elif edit.before.count("\n") != after.count("\n"):
        return None  # lines added or removed: a rewrite (a new variable, a block restructured), not a pattern
    else:
        found = patterns(edit.before, after, lines)
        kind = "rename" if found and all(op.rename for op in found) else "repeat"
        # The change as it was made; then with the names around it standing for any name.
        tries = [found, [op for op in (o.loosened() for o in found) if op is not None]]
    shape = [words(line) for line in edit.before.splitlines()]
    here = edit.line if cursor_line is None else cursor_line
    lo, hi = max(0, edit.line - WINDOW), min(len(lines), edit.line + edit.count + WINDOW)
    # Not the edit's own lines, nor comments and docstrings (but their examples, for a rename), unless
    # the edit was made in one.
    mine = set(range(edit.line, edit.line + edit.count))
    prose = prose_lines(lines, hi)
    if edit.line in prose and calls is None:
        prose = set()
    else:  # (a docstring's example, ``>>> f(x)``, is code: a rename applies there)
        examples = {i for i in prose if lines[i].lstrip().startswith((">>>", "... "))}
        mine |= prose - examples if calls is None and any(op.rename for t in tries for op in t) else prose
    below = [i for i in range(max(here, lo), hi) if i not in mine]  # (the cursor's line is below)
    above = [i for i in range(min(here, hi) - 1, lo - 1, -1) if i not in mine]
    tries = [t for t in tries if t or calls is not None]
    renames = [[op for op in t if op.rename] for t in tries]
    # Every line the change applies to (as made if it can, else loosened), nearest first; the one taken
    # is the most like the edited lines (in steps of RANK_STEP), the nearest of those.
    order = nearest_first(below, above)
    matches = []
    for i in order:
        for tried in tries if i not in prose else renames:
            if rewrite(lines[i], tried, calls, shape) is not None:
                matches.append((i, tried))
                break
    if not matches:
        return None
    i, tried = matches[0]
    if shape and calls is None:
        i, tried = min(matches, key=lambda m: -int(likeness(lines[m[0]], shape) / RANK_STEP))
    step = 1 if i >= here else -1
    run = [(i, rewrite(lines[i], tried, calls, shape))]
    j = i + step
    while lo <= j < hi and j not in mine and (j in prose) == (i in prose) \
            and (more := rewrite(lines[j], tried, calls, shape)) is not None:  # fmt: skip
        run.append((j, more))
        j += step
    run.sort()
    first, last = run[0][0], run[-1][0]
    others = sum(1 for k, _ in matches if not first <= k <= last)
    old = "".join(lines[first : last + 1])
    return Suggestion(first, last, old, "".join(n for _, n in run), kind, others)


def likeness(line: str, shape: list[set[str]]) -> float:
    """How like the edited lines ``line`` is: the most tokens in common with one of them, of all."""
    mine = words(line)
    return max((len(mine & other) / max(1, len(mine | other)) for other in shape), default=0.0)


def patterns(before: str, after: str, lines: list[str]) -> list[Op]:
    """The edit's changes that can be looked for elsewhere: small ones within a line (a rewrite of
    several lines is not a pattern); a name replaced by another is a rename (found anywhere) only where
    the old name is bound in the document (defined, assigned, imported, a parameter) and neither name is
    a constant; else it is found in its context (``isinstance(x, dict)`` -> ``Mapping``: not every
    ``dict``). Names that changed places (``import a, b`` -> ``import b, a``) are not renamed."""
    out = []
    changed = ops(before, after)
    swapped = {(op.new, op.old[0]) for op in changed if op.renames}  # (names that changed places: a reorder)
    for op in changed:
        if op.renames and (op.old[0], op.new) in swapped:
            continue
        if len(op.old) > MAX_OP_TOKENS or len(op.new) > MAX_OP_CHARS or "\n" in op.new or START in op.old \
                or END in op.old:  # fmt: skip
            continue
        if op.renames and (op.new in CONSTANTS or op.old[0] in CONSTANTS or not bound(op.old[0], lines, before)):
            op = Op(op.left, op.old, op.right, op.new, free=False)
        if op.rename or op.specific:
            out.append(op)
    return out


def bound(name: str, lines: list[str], before: str) -> bool:
    """Whether ``name`` is bound in ``lines`` or ``before``: defined, assigned, imported, a parameter or
    a loop's variable (by the look of the line; any language we complete)."""
    n = re.escape(name)
    binding = re.compile(
        rf"\b(?:def|class|fn|func|function|let|const|var|type|struct|enum|import|as|for|mut)\s+(?:[\w$.]+\s*,\s*)*{n}\b"
        rf"|(?<![.\w$]){n}\s*(?::[^=\n]*)?(?<![=!<>])=(?![=>])"
        rf"|^\s*(?:async\s+)?(?:def|fn|func|function)\b.*[(,]\s*\**{n}\b"
        rf"|^\s*(?:[\w$]+\s*,\s*)*{n}\s*,?\s*\)?\s*$"
    )
    return any(name in line and binding.search(line) for line in (*lines, *before.splitlines()))


def prose_lines(lines: list[str], hi: int) -> set[int]:
    """Lines before ``hi`` that are comments, or inside a triple-quoted string (a docstring)."""
    out, quote = set(), None
    for i in range(hi):
        line = lines[i]
        stripped = line.lstrip()
        if quote is not None or stripped.startswith(("#", "//", "/*", "* ")):
            out.add(i)
        for q in ('"""', "'''"):
            if q in line and (quote is None or quote == q):
                if line.count(q) % 2 == 1:
                    quote = q if quote is None else None
                    out.add(i)
    return out


def nearest_first(below: list[int], above: list[int]) -> list[int]:
    """Lines below and above, nearest first (below first at equal distance)."""
    out = []
    b = a = 0
    while b < len(below) or a < len(above):
        if a >= len(above) or (b < len(below) and below[b] - below[0] <= above[0] - above[a]):
            out.append(below[b])
            b += 1
        else:
            out.append(above[a])
            a += 1
    return out


def rewrite(line: str, patterns: list[Op], calls: tuple[str, str] | None, shape: list[set[str]] = ()) -> str | None:
    """``line`` (with its break) with the change made, or None where it does not apply: a change other
    than a rename only on a line shaped like one the edit changed (``SHAPE``: the share of tokens they
    have in common, of all their tokens)."""
    content = line.rstrip("\r\n")
    if calls is not None:
        new = carry_to_calls(content, *calls)
    else:
        here = [op for op in patterns if op.anchor in content]
        new = apply_ops(content, here) if here else None
        if new is not None and shape and not all(op.rename for op in here) and likeness(content, shape) < SHAPE:
            return None
    if new is None or new == content or balance(new) != balance(content):  # (never a bracket left open)
        return None
    return new + line[len(content) :]


def words(line: str) -> set[str]:
    return {t.text for t in tokens(line) if t.text not in (START, END)}


def balance(text: str) -> tuple[int, int, int]:
    return text.count("(") - text.count(")"), text.count("[") - text.count("]"), text.count("{") - text.count("}")


def added_parameter(before: str, after: str) -> tuple[str, str] | None:
    """(function name, argument) where the edit added a last parameter without a default to the
    definition on its first line (``def f(a, b)`` -> ``def f(a, b, c)``: calls gain ``c``)."""
    b, a = before.split("\n", 1)[0], after.split("\n", 1)[0]
    m, n = DEFINITION.match(b), DEFINITION.match(a)
    if m is None or n is None or m.group(1) != n.group(1) or "(" not in b or "(" not in a:
        return None
    old, new = params(b), params(a)
    if old is None or new is None or len(new) != len(old) + 1 or new[: len(old)] != old:
        return None
    added = new[-1]
    if "=" in added or added.startswith("*") or added in ("self", "cls"):
        return None
    name = re.split(r"[\s:?]", added, maxsplit=1)[0]
    if not re.fullmatch(r"[A-Za-z_$][\w$]*", name):
        name = added.split()[-1] if added.split() else ""  # Go: ``b int`` -> ``b``; Rust ``b: u8`` above
        if not re.fullmatch(r"[A-Za-z_$][\w$]*", name):
            return None
    return m.group(1), name


def params(line: str) -> list[str] | None:
    """The parameters in the definition's first parentheses (on this line), stripped; None when they
    do not close on it."""
    start = line.index("(") + 1
    depth, cur, out = 0, "", []
    for ch in line[start:]:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            if depth == 0:
                out.append(cur.strip())
                return [p for p in out if p]
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    return None


def carry_to_calls(line: str, name: str, arg: str) -> str | None:
    """``line`` with ``arg`` added as the last argument of each call of ``name`` closed on it (not
    its definition, nor a call that already passes ``arg``)."""
    if DEFINITION.match(line) or name not in line:
        return None
    out, pos = [], 0
    for m in re.finditer(rf"(?<![\w$.]){re.escape(name)}\s*\(", line):
        if m.start() < pos:
            continue
        depth, end = 0, None
        for k in range(m.end(), len(line)):
            ch = line[k]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                if depth == 0:
                    end = k
                    break
                depth -= 1
        if end is None:
            continue
        inside = line[m.end() : end]
        if re.search(rf"(?<![\w$]){re.escape(arg)}(?![\w$])", inside):
            continue
        out += [line[pos:end], (", " if inside.strip() else "") + arg]
        pos = end
    if not out:
        return None
    return "".join(out) + line[pos:]
