"""Stage 2: drafts for the model to verify (continuations the document, the workspace, earlier answers
or the compiler suggest), the compiler's window once for all, and which drafts may be shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from celeris_complete.backends.base import Supports
from celeris_complete.checks.grammar import GrammarWindow, grammar_window
from celeris_complete.checks.postprocess import postprocess
from celeris_complete.checks.syntax import fits, header_drafts, judge, mended
from celeris_complete.checks.window import BLAMED, Window, window
from celeris_complete.config import Settings
from celeris_complete.drafts.imports import import_drafts, workspace_imports
from celeris_complete.drafts.search import find_drafts
from celeris_complete.drafts.table import MAX_LINE, Draft, PreviousCompletions, draft_tokens
from celeris_complete.engine.request import InfillRequest, SpanPlan
from celeris_complete.model.context import Context
from celeris_complete.model.diffusion import SpecialIds

# Drafts asked for beyond those used, to take the place of any the compiler or the names check refuses.
DRAFTS_IN_RESERVE = 2


@dataclass(slots=True)
class Drafts:
    win: Window | GrammarWindow | None = None  # the compiler's or the parser's window (a checked request)
    offers: list[Draft] = field(default_factory=list)  # for the model to judge, best first
    spare: list[Draft] = field(default_factory=list)  # the next ones: alternatives as they are
    ids: list[torch.Tensor] | None = None  # each offer as canvas tokens


def gather_drafts(
    req: InfillRequest, plan: SpanPlan, ctx: Context, s: Settings, previous: PreviousCompletions, tok,
    ids: SpecialIds, can: Supports,
) -> Drafts:  # fmt: skip
    prefix, suffix, mode = req.prefix, req.suffix, plan.mode
    out = Drafts(judging_window(req, plan))
    if not (s.drafts and plan.decode.temperature == 0 and can.drafts):
        return out
    win = out.win
    # Where the compiler leaves one header to write (``else:``...), it goes first.
    headers = [Draft(h, "syntax", 1) for h in header_drafts(win, prefix, suffix)] if plan.python and win else []
    # On an import line, the names the document uses and nothing imports yet go first.
    whole = plan.python and req.whole_file
    try:
        imports = import_drafts(prefix, suffix, lambda: workspace_imports(req.lines, req.source)) if whole else []
    except Exception:  # drafts are a help: whatever goes wrong there, the model still answers
        imports = []
    imports = [Draft(text, "import", 1) for text in imports]
    cheap = (*imports, *headers, *req.drafts, *previous.drafts(req.source, prefix))
    wanted = max(s.draft_candidates, req.alternatives)
    family = plan.language.family if plan.language is not None else None  # (the workspace's lines of that family)
    found = find_drafts(prefix, suffix, req.lines, req.source, wanted + (DRAFTS_IN_RESERVE if win else 0), cheap,
                        family)  # fmt: skip
    if win is not None:  # a draft the compiler blames is wrong (or uses a name nothing binds): the next one
        found = fitting(found, win, wanted, prefix, suffix, mode)
    # The model judges the first; the next ones are alternatives as they are, before any sample.
    out.offers, out.spare = found[: s.draft_candidates], found[s.draft_candidates :]
    line = "" if "\n" in ctx.heal else prefix[prefix.rfind("\n") + 1 : len(prefix) - len(ctx.heal)][-MAX_LINE:]
    # A line ends the span; a block's first line is drafted and the model writes the rest.
    end, tail = ([ids.eos], "") if mode == "line" else ([], "\n")
    out.ids = [
        torch.tensor((draft_tokens(tok.encode, line, ctx.heal + d.text + tail) + end)[: plan.canvas])
        for d in out.offers
    ] or None
    return out


def judging_window(req: InfillRequest, plan: SpanPlan) -> Window | GrammarWindow | None:
    """What judges the answers of a checked request: Python's compiler window, else the language's parser's."""
    if not plan.checked:
        return None
    if plan.language is not None and plan.language.family != "python":
        return grammar_window(req.prefix, req.suffix, plan.language, req.language)
    return window(req.prefix, req.suffix, req.whole_file)


def fitting(
    found: Sequence[Draft], win: Window | GrammarWindow, wanted: int, prefix: str, suffix: str, mode: str
) -> list[Draft]:
    """The first ``wanted`` drafts the compiler's check would show, judged in order. A line's draft is
    the whole answer (the span ends after it), so it is judged as shown: one the compiler blames where
    the window compiles without it (``Window.clean``; a copy of another hole's line, of a line being
    edited), and that no re-indentation or shortening repairs, would be withheld or replaced after the
    model kept it, in place of the model's own answer. A block's draft is only its first line (the
    model writes the rest): only its names are judged. Where the window does not compile as it is (a
    line that opened a block or a bracket is missing), the drafts that make it compile go first."""
    out: list[Draft] = []
    if not win.clean and len(found) > 1:
        shown = [postprocess(d.text, prefix, suffix, mode) if mode == "line" else d.text for d in found]
        if not fits(win, shown[0]):
            good = [i for i in range(1, len(found)) if fits(win, shown[i])]
            if good:
                rest = [d for i, d in enumerate(found) if i not in good]
                found = [found[i] for i in good] + rest
    for d in found:
        if len(out) == wanted:
            break
        if mode == "line":
            text = postprocess(d.text, prefix, suffix, mode)
            if text.strip() and judge(win, text) == BLAMED and win.strict and mended(text, prefix, suffix, win) is None:
                continue
        elif win.names_missing(d.text):
            continue
        out.append(d)
    return out


def usable(spare: Sequence[Draft], text: str, prefix: str, suffix: str, mode: str, win) -> list[str]:
    """The drafts after the one the model judged, as an invoked request's alternatives: post-processed,
    non-empty, other than the answer, each once, and (given the compiler's window ``win``) none it blames."""
    out: list[str] = []
    for d in spare:
        t = postprocess(d.text, prefix, suffix, mode)
        if t.strip() and t != text and t not in out:
            out.append(t)
    if win is not None:
        out = [t for t in out if judge(win, t) != BLAMED]
    return out
