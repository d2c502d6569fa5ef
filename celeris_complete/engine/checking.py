"""Stage 4: the verdict on the answer of Python's compiler, or of the language's parser elsewhere
(checks/grammar.py): repaired, replaced by a sampled answer that parses, or withheld; alternatives it
blames dropped.  In a document in another language, an answer with a form only Python has is cut or
withheld besides (verdict "shortened" or "foreign"; checks/languages.py): a lenient grammar lets some
through.  And the check of an answer a remote server completed whole."""

from __future__ import annotations

from celeris_complete.backends.base import Backend, Completion
from celeris_complete.checks.grammar import grammar_window
from celeris_complete.checks.languages import Language, first_foreign_line, foreign, policy, resolve
from celeris_complete.checks.syntax import check, judge
from celeris_complete.checks.window import BLAMED
from celeris_complete.config import Settings
from celeris_complete.engine.decode import Decoding
from celeris_complete.engine.request import InfillRequest, SpanPlan
from celeris_complete.model.context import Context


def check_answer(run: Decoding, text: str, others: tuple[str, ...], drafted: list[str]) -> tuple[str, tuple, str]:
    """(answer, alternatives with the spare drafts first, the verdict or "")."""
    verdict = ""
    req, plan, s = run.req, run.plan, run.engine.settings
    # (A parser's window is None where the parse took too long: nothing judged then.)
    if plan.checked and (plan.python or run.drafts.win is not None):  # under the lock: replacements decode on
        # the same keys/values
        # As many slots as syntax_candidates line canvases: fewer samples of a block's larger canvas.
        n = max(1, -(-s.syntax_candidates * s.canvas_line // plan.canvas))

        def sample() -> list[str]:
            return run.samples(n) if req.repair_samples else []

        # Only samples may replace a blamed answer (a draft the model never judged may not).
        text, verdict, win = check(text, req.prefix, req.suffix, others, sample, run.drafts.win)
        # Alternatives the user asked for: none the compiler blames either.
        others = tuple(o for o in others if o != text and judge(win, o) != BLAMED)
    if plan.language is not None and plan.language.family != "python":  # a parser lets some Python through
        text, guard, others, drafted = keep_python_out(plan.language, req.prefix, text, others, drafted)
        verdict = guard or verdict
    if plan.policy == "drafts":  # markup, data, a generated file: no text of the model's own
        text, others = drafts_only(run, text), ()
        verdict = verdict if text else "drafts-only"
    return text, tuple(d for d in drafted if d != text) + others, verdict


def drafts_only(run: Decoding, text: str) -> str:
    """``text``'s first line where it is the draft the model judged, accepted whole; else "" (nothing the
    model wrote itself is shown)."""
    drafts = run.drafts
    if not text or not drafts.offers or drafts.ids is None:
        return ""
    pick = run.chosen[0] if run.chosen else 0
    whole = bool(run.kept) and run.kept[0] >= int(drafts.ids[pick].numel())
    line = text.split("\n", 1)[0]
    return line if whole and line.strip() and drafts.offers[pick].text.strip().startswith(line.strip()) else ""


def keep_python_out(
    language: Language, prefix: str, text: str, others: tuple[str, ...], drafted: list[str]
) -> tuple[str, str, tuple[str, ...], list[str]]:
    """(answer, verdict, alternatives, drafts) without a form only Python has: the answer cut before its
    first line with one ("shortened"), or withheld when that is its first ("foreign"); alternatives and
    drafts with one left out."""
    before = prefix[prefix.rfind("\n") + 1 :]
    verdict = ""
    at = first_foreign_line(language, before, text) if text else None
    if at is not None:
        kept = "\n".join(text.split("\n")[:at]).rstrip()
        text, verdict = (kept, "shortened") if kept.strip() else ("", "foreign")
    others = tuple(o for o in others if not foreign(language, before, o))
    return text, verdict, others, [d for d in drafted if not foreign(language, before, d)]


def check_whole(
    text: str, prefix: str, suffix: str, language: str | None, syntax_candidates: int, whole: bool = True
) -> tuple[str, str]:
    """(answer, verdict) for an answer completed whole (a remote server's, a batched row's): judged by
    Python's compiler or the language's parser, repaired or withheld without samples (setting
    ``syntax_candidates`` 0: not judged), and in another language than Python never with a form only
    Python has; nothing where the language's policy shows drafts only or the line is minified
    (``languages.policy``: such an answer is the model's own).  ``language`` unknown or None: as it is."""
    found = resolve(language)
    if not text or found is None:
        return text, ""
    shown = policy(found, prefix, suffix, whole)
    if shown != "model":
        return "", "minified" if shown == "off" else "drafts-only"
    verdict = ""
    if found.family == "python":
        if syntax_candidates > 0:
            text, verdict, _ = check(text, prefix, suffix, whole=whole)
        return text, verdict
    win = grammar_window(prefix, suffix, found, language) if syntax_candidates > 0 else None
    if win is not None:
        text, verdict, _ = check(text, prefix, suffix, win=win)
    text, guard, _, _ = keep_python_out(found, prefix, text, (), [])
    return text, guard or verdict


def complete_whole(b: Backend, req: InfillRequest, plan: SpanPlan, ctx: Context, s: Settings, t0: float) -> Completion:
    """A backend that completes whole (a remote server): its answer checked here (``check_whole``)."""
    done = b.complete(ctx, plan.mode, req.max_tokens, req.steps, plan.decode, req.deadline_ms, req.should_cancel, s, t0,
                      language=req.language)  # fmt: skip
    text, verdict = check_whole(done.text, req.prefix, req.suffix, req.language, s.syntax_candidates, req.whole_file)
    if verdict:
        done.text, done.syntax = text, verdict
    return done
