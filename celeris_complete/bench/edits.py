"""``bench edits``: next-edit tasks mined from git histories, in the categories Sweep's next-edit
benchmark reports.

A task is one file of one commit (its first parent's version, the commit's hunks from ``git show
-U0``): the user has just made one hunk (sent as an editor sends a change; the document is the parent
file with that hunk applied), and the next edit is one of the commit's other hunks in that file.

- propagation tasks: hunks of the file repeat a change (they make the same token-level changes,
  ``edits.change``: a rename, a repeated edit, an added argument); the user's hunk is the group's first or its last, the
  next edit any other hunk of the file (the user may take them in any order). Their category is where
  the group's nearest other hunk lies: ``below`` or ``above`` within ``NEAR`` lines, else ``far``;
- ``other``: a file whose hunks do not repeat one another (some may share a change and make others
  too; the user's: its first hunk; the next: any other);
- ``noise``: a file the commit changed in one small hunk only: nothing should be suggested after it.

A suggestion is exact when the document it makes is the one a next hunk makes, character for
character.  Repositories should be ones our corpus never saw (``bench repo``'s packages' own
repositories, which ``fetch`` brings)."""

from __future__ import annotations

import random
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from celeris_complete.edits.change import ops
from celeris_complete.edits.history import EditHistory
from celeris_complete.edits.propagate import Suggestion, suggest
from celeris_complete.errors import CelerisError

NEAR = 30  # lines: a next edit further than this from the user's is a jump ("far")
MAX_FILE_LINES = 20_000
NOISE_LINES = 3  # a noise task's hunk replaces at most this many lines by at most this many
CATEGORIES = ("below", "above", "far", "other", "noise")
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    """Lines ``start .. start + count`` of the parent file (0-based; ``count`` 0: an insertion before
    ``start``) became ``new``."""

    start: int
    count: int
    new: list[str]


@dataclass
class Task:
    repo: str
    commit: str
    path: str
    category: str
    parent: list[str]  # the parent file's lines
    edit: Hunk  # the user's
    nexts: list[Hunk] = field(default_factory=list)  # each acceptable next edit (none: noise)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", f"--git-dir={repo}", *args], capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        raise CelerisError(f"git {' '.join(args[:2])} in {repo} failed: {done.stderr.strip()[:200]}")
    return done.stdout


def git_dir(path: Path) -> Path:
    """The git directory of ``path`` (a work tree, or a bare or mirrored repository)."""
    for candidate in (path / ".git", path):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    raise CelerisError(f"{path} is not a git repository (no .git, no HEAD and objects)")


def parse_hunks(diff: str) -> dict[str, list[Hunk]]:
    """``git show -U0``'s hunks per file (files changed in place only)."""
    files: dict[str, list[Hunk]] = {}
    current: list[Hunk] | None = None
    old_left = new_left = 0  # lines of the hunk still to read
    last = ""
    for line in diff.splitlines(keepends=True):
        if old_left or new_left:
            if line.startswith("-") and old_left:
                old_left, last = old_left - 1, "-"
                continue
            if line.startswith("+") and new_left:
                new_left, last = new_left - 1, "+"
                current[-1].new.append(line[1:])
                continue
        if line.startswith("\\"):  # "\ No newline at end of file", after the line it speaks of
            if last == "+" and current:
                current[-1].new[-1] = current[-1].new[-1].rstrip("\n")
        elif line.startswith("diff --git "):
            current = None
        elif line.startswith("+++ "):
            name = line[4:].rstrip("\n")
            current = files.setdefault(name[2:], []) if name.startswith("b/") else None
        elif (m := HUNK.match(line)) and current is not None:
            old_start, old_left = int(m.group(1)), int(m.group(2) or 1)
            new_left = int(m.group(4) or 1)
            current.append(Hunk(old_start - 1 if old_left else old_start, old_left, []))
    return {path: hunks for path, hunks in files.items() if hunks}


def apply(lines: list[str], hunk: Hunk, shift: int = 0) -> list[str]:
    s = hunk.start + shift
    return lines[:s] + hunk.new + lines[s + hunk.count :]


def changes(lines: list[str], hunk: Hunk) -> frozenset:
    """The token-level changes the hunk makes (what two hunks share when they repeat a change)."""
    before = "".join(lines[hunk.start : hunk.start + hunk.count])
    return frozenset((op.old, op.new) for op in ops(before, "".join(hunk.new)) if op.rename or op.specific)


def groups(lines: list[str], hunks: list[Hunk]) -> list[list[int]]:
    """Hunks (indices) that make the same change (the same token-level changes, ``changes``), in groups
    of two or more: hunks that share a change but also make others are not a repeat of one another."""
    out: dict[frozenset, list[int]] = {}
    for i, h in enumerate(hunks):
        key = changes(lines, h)
        if key:
            out.setdefault(key, []).append(i)
    return [g for g in out.values() if len(g) > 1]


def where(edit: Hunk, nexts: list[Hunk]) -> str:
    """below / above / far: where the nearest next edit lies from the user's."""
    end = edit.start + max(edit.count, 1)
    gaps = [(h.start - end, "below") if h.start >= end else (edit.start - (h.start + max(h.count, 1)), "above")
            for h in nexts]  # fmt: skip
    gap, side = min(gaps)
    return side if gap <= NEAR else "far"


def mine(repo: Path, suffixes: tuple[str, ...] = (".py",), max_commits: int = 2_000) -> list[Task]:
    """Every task in ``repo``'s last ``max_commits`` commits (no merges) that changed files with these
    suffixes."""
    gd = git_dir(repo)
    specs = [f"*{s}" for s in suffixes]
    commits = git(gd, "log", "--no-merges", "--format=%H", f"-n{max_commits}", "--", *specs).split()
    tasks: list[Task] = []
    for commit in commits:
        diff = git(gd, "show", "-U0", "--format=", "--no-color", "--no-renames", "--diff-filter=M", commit, "--",
                   *specs)  # fmt: skip
        for path, hunks in parse_hunks(diff).items():
            try:
                text = git(gd, "show", f"{commit}^:{path}")
            except CelerisError:
                continue
            if "\0" in text:
                continue
            lines = text.splitlines(keepends=True)
            if len(lines) > MAX_FILE_LINES:
                continue
            tasks += file_tasks(str(repo), commit, path, lines, hunks)
    return tasks


def file_tasks(repo: str, commit: str, path: str, lines: list[str], hunks: list[Hunk]) -> list[Task]:
    if len(hunks) == 1:
        h = hunks[0]
        small = h.count <= NOISE_LINES and len(h.new) <= NOISE_LINES
        return [Task(repo, commit, path, "noise", lines, h)] if small and changes(lines, h) else []
    found = groups(lines, hunks)
    if not found:
        first, rest = hunks[0], hunks[1:]
        return [Task(repo, commit, path, "other", lines, first, rest)] if changes(lines, first) else []
    out = []
    for g in found:  # (the next edit may be any other hunk of the file; its category is the group's)
        for pick in sorted({g[0], g[-1]}):
            category = where(hunks[pick], [hunks[k] for k in g if k != pick])
            out.append(Task(repo, commit, path, category, lines, hunks[pick], hunks[:pick] + hunks[pick + 1 :]))
    return out


def sample(tasks: list[Task], per_category: int, seed: int) -> list[Task]:
    """At most ``per_category`` tasks of each category, and at most a quarter of them from one commit
    (a rename across a file makes dozens)."""
    rng = random.Random(seed)
    out = []
    for cat in CATEGORIES:
        pool = [t for t in tasks if t.category == cat]
        rng.shuffle(pool)
        per_commit: dict[str, int] = {}
        for t in pool:
            if len([x for x in out if x.category == cat]) >= per_category:
                break
            if per_commit.get(t.commit, 0) >= max(1, per_category // 4):
                continue
            per_commit[t.commit] = per_commit.get(t.commit, 0) + 1
            out.append(t)
    return out


def run_task(task: Task) -> dict:
    """The user's hunk sent as an editor's change, then the suggestion; whether it is exact."""
    h = task.edit
    history = EditHistory()
    history.change(task.parent, h.start, h.start + h.count, "".join(h.new), whole_lines=True)
    doc = apply(task.parent, h)
    cursor = h.start + max(len(h.new), 1) - 1
    t0 = time.perf_counter()
    got = suggest(doc, history, cursor)
    ms = (time.perf_counter() - t0) * 1e3
    exact = False
    if got is not None and task.nexts:
        shown = "".join(apply_suggestion(doc, got))
        delta = len(h.new) - h.count
        wanted = {"".join(apply(doc, n, delta if n.start >= h.start + h.count else 0)) for n in task.nexts}
        exact = shown in wanted
    return {"category": task.category, "suggested": got is not None, "exact": exact, "ms": ms,
            "kind": got.kind if got else None, "commit": task.commit[:10], "path": task.path}  # fmt: skip


def apply_suggestion(lines: list[str], s: Suggestion) -> list[str]:
    return lines[: s.first] + s.new.splitlines(keepends=True) + lines[s.last + 1 :]


def summarize(results: list[dict]) -> dict:
    out: dict = {}
    for cat in CATEGORIES:
        rows = [r for r in results if r["category"] == cat]
        if not rows:
            continue
        n = len(rows)
        row = {"tasks": n, "suggested": sum(r["suggested"] for r in rows) / n}
        if cat == "noise":
            row["quiet"] = 1 - row["suggested"]
        else:
            row["exact"] = sum(r["exact"] for r in rows) / n
        out[cat] = row
    prop = [r for r in results if r["category"] in ("below", "above", "far")]
    if prop:
        out["propagation"] = {"tasks": len(prop), "exact": sum(r["exact"] for r in prop) / len(prop)}
    ms = sorted(r["ms"] for r in results if r["suggested"])
    if ms:
        out["latency_ms"] = {"p50": ms[len(ms) // 2], "p95": ms[min(len(ms) - 1, int(len(ms) * 0.95))]}
    return out


def render(summary: dict) -> str:
    lines = [f"{'category':<12}{'tasks':>7}{'suggested':>11}{'exact':>8}{'quiet':>8}"]
    for cat in (*CATEGORIES, "propagation"):
        if cat in summary:
            r = summary[cat]
            sug = f"{r['suggested']:.0%}" if "suggested" in r else ""
            exact = f"{r['exact']:.0%}" if "exact" in r else ""
            quiet = f"{r['quiet']:.0%}" if "quiet" in r else ""
            lines.append(f"{cat:<12}{r['tasks']:>7}{sug:>11}{exact:>8}{quiet:>8}")
    if "latency_ms" in summary:
        lat = summary["latency_ms"]
        lines.append(f"propagated suggestion: p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms")
    return "\n".join(lines)
