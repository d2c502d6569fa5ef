"""The infill engine: text around the cursor in, completion and timings out.

Everything slow (loading, quantizing, thread set-up, lookup tables) happens in
the constructor; ``complete`` is the hot path: build the context, take its
keys/values from the cache (encoding only the tokens the cache lacks), run a
few refinement steps on the span canvas, detokenize, post-process.  Alternatives (an invoked
completion) ride along: the drafts ranked after those the model judged, as they are (post-processed,
and checked by the compiler for Python), then sampled canvases for the places left, as one batch on
the same cached context, starting from the first step's prediction (see ``diffusion.py``).  Only
samples may replace an answer the compiler blames: a draft the model never judged may not.

What runs the model is a backend (``backend.py``): our own model directory (eager, traced or
ONNX), a transformers directory of a public diffusion model, or a remote server.  The engine asks
the backend what it supports (token healing, snippets, caching, drafts, alternatives, per-step
canvases) rather than which one it is; decoding (``diffusion.py``) is the same for every backend
whose steps the engine runs, and a remote one completes the whole request itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch

from .backend import Supports, open_backend
from .backend_hf import TransformersBackend
from .backend_ours import DECODE_KEYS, has_int8_kernels
from .config import Settings
from .context import Context
from .context_cache import ContextCache
from .diffusion import Cancelled, DecodeSettings, diffuse, span_tokens
from .drafts import MAX_LINE, Draft, LineTable, PreviousCompletions, draft_tokens, find_drafts
from .import_drafts import import_drafts, workspace_imports
from .postprocess import at_blank_line, choose_mode, postprocess
from .syntax_check import BLAMED, Window, check, fits, header_drafts, is_python, judge, line_is_open, mended, window

__all__ = ["DECODE_KEYS", "Cancelled", "Completion", "Engine", "has_int8_kernels"]

MASKED_SLOT = "\u2591"  # how canvas_text shows a slot the model has not committed yet
# Alternatives are drawn at this temperature among each slot's likeliest tokens (the tail of a small
# model's distribution is noise, and a race over the whole vocabulary costs ~5 ms per canvas and step).
ALTERNATIVE_TEMPERATURE = 0.8
ALTERNATIVE_TOP_K = 16
# Drafts asked for beyond those used, to take the place of any the compiler or the names check refuses.
DRAFTS_IN_RESERVE = 2


@dataclass
class Completion:
    text: str
    mode: str
    steps: int
    tokens: int
    cache: str  # "hit", "partial" or "miss"; "remote" from a remote backend
    context_tokens: int
    timings_ms: dict = field(default_factory=dict)  # per phase; "steps" holds each refinement step
    raw: str = ""  # the decoded span before post-processing, starting with ``heal``
    heal: str = ""  # text cut from before the cursor that the span rewrites (token healing)
    snippet_tokens: int = 0  # context tokens taken by snippets from other files
    draft: dict | None = None  # the draft offered: its source, its tokens, how many the model kept
    # Other drafts, then sampled completions, as ``text`` (they may repeat it or each other).
    alternatives: tuple[str, ...] = ()
    # The compiler's verdict (Python; see syntax_check.py): "ok", "elsewhere" (the window is broken
    # whatever the answer), or for an answer it blamed: "reindented", "shortened", "closed", "replaced" (by a
    # sampled answer), "withheld" or "kept"; "" when not checked.
    syntax: str = ""


class Engine:
    def __init__(self, settings: Settings, trace_in_background: bool = False) -> None:
        """``trace_in_background``: answer with the eager model at once and switch to the traced
        graphs (about a second of work) when they are ready; for a server that should be ready soon."""
        self.impl = b = open_backend(settings, trace_in_background)
        self.supports: Supports = b.supports
        self.recommended = b.recommended
        self.path = b.path
        self.use_settings(settings)
        self.device = b.device
        self.meta = b.meta
        self.max_context = b.max_context
        self.max_canvas = b.max_canvas
        self.quant = b.quant
        self.backend = b.name
        self.cache = b.cache
        self.lock = b.lock
        self.previous = PreviousCompletions()  # earlier answers, drafts for the same line
        self.tok = getattr(b, "tok", None)
        self.ids = getattr(b, "ids", None)
        self._starts_line = getattr(b, "starts_line", None)
        self.tracer = getattr(b, "tracer", None)
        if hasattr(b, "onnx_device"):
            self.onnx_device = b.onnx_device

    @property
    def model(self):
        """What runs the refinement steps (swapped for the traced graphs once they are ready)."""
        return self.impl.model

    @property
    def hf(self):
        """The transformers adapter, when the model is one (else None)."""
        return self.impl.model if isinstance(self.impl, TransformersBackend) else None

    def use_settings(self, settings: Settings) -> None:
        """Take new settings (those that need no reload). Decoding settings the model recommends
        (tuned on validation data) replace built-in defaults only, never a value the user set."""
        tuned = {k: v for k, v in self.recommended.items() if settings.source(k) == "default"}
        self.settings = settings.with_overrides(tuned, f"{self.path}/config.json (decode)") if tuned else settings

    def tokens_starting_with(self, text: str) -> torch.Tensor:
        return self.impl.tokens_starting_with(text)

    def canvas_text(self, row: torch.Tensor, heal: str = "", masked: str = MASKED_SLOT) -> str:
        """A canvas as text: committed tokens decoded, each still-masked slot shown as ``masked``,
        nothing from the first end-of-span on; ``heal`` (text before the cursor that the span
        rewrites) left out once the canvas starts with it."""
        parts: list[str] = []
        run: list[int] = []
        for t in row.tolist():
            if t == self.ids.eos:
                break
            if t == self.ids.mask:
                if run:
                    parts.append(self.tok.decode(run))
                    run = []
                parts.append(masked)
            else:
                run.append(t)
        if run:
            parts.append(self.tok.decode(run))
        text = "".join(parts)
        return text[len(heal) :] if heal and text.startswith(heal) else text

    def _context_kv(self, tokens: list[int]):
        return self.impl.encode(Context(tokens, 0, 0))

    def complete(
        self,
        prefix: str,
        suffix: str,
        mode: str | None = None,
        max_tokens: int | None = None,
        steps: int | None = None,
        deadline_ms: float | None = None,
        should_cancel=None,
        threshold: float | None = None,
        file_start: bool = True,
        file_end: bool = True,
        temperature: float | None = None,
        seed: int | None = None,
        snippets: Sequence[str] = (),
        lines: LineTable | None = None,
        source: str | None = None,
        alternatives: int = 1,
        on_step=None,
        drafts: Sequence[Draft] = (),
        language: str | None = None,
        repair_samples: bool = True,
    ) -> Completion:
        """Complete at the cursor between ``prefix`` and ``suffix``.

        ``deadline_ms`` (from the call) makes the answer anytime: the remaining slots are
        committed when it passes.  ``should_cancel()`` is asked between steps; yes raises
        ``Cancelled``.  Safe to call from several threads (one runs the model at a time).
        ``file_start``/``file_end`` say whether ``prefix``/``suffix`` reach the file's start/end
        (callers may pass a slice of a huge document around the cursor).  ``snippets``: text
        from other files that may help, most relevant first.  ``lines``: the workspace's lines, for
        drafts (``source`` is the document's key there, left out of its own drafts); ``drafts``: cheaper
        drafts found by the caller (the language server's typing cache), tried first.
        ``alternatives`` > 1: also that many completions less one (``Completion.alternatives``): the
        next drafts as ranked, then samples; the answer itself is the same as without them (except where
        the compiler blames it mid-line: then the samples are tried as its replacement).
        ``on_step(step, text)``, when given, sees the whole canvas as text after every refinement
        step (see ``canvas_text``), before post-processing.
        ``language`` (an LSP language id or a file name): for Python, an answer the parser blames is
        repaired, or replaced by a sampled one that compiles (setting ``syntax_candidates``; see
        ``syntax_check.py``); ``repair_samples`` False: by no newly sampled one (no model calls for it).
        """
        s = self.settings
        t0 = time.perf_counter()
        mode = choose_mode(prefix, mode or s.mode)
        canvas = max_tokens or (s.canvas_line if mode == "line" else s.canvas_block)
        canvas = max(1, min(canvas, int(self.max_canvas)))
        budget_suffix = min(s.suffix_tokens, self.max_context // 4)
        budget_prefix = min(s.prefix_tokens, self.max_context - budget_suffix - 4)
        budget_snippets = min(s.snippet_tokens, self.max_context - budget_suffix - budget_prefix - 4)
        b, can = self.impl, self.supports
        ctx = b.context(prefix, suffix, budget_prefix, budget_suffix, file_start, file_end, snippets, budget_snippets)
        settings = DecodeSettings(
            steps=steps or s.steps,
            threshold=s.threshold if threshold is None else threshold,
            eos_penalty=s.eos_penalty_line if mode == "line" and s.eos_penalty_line is not None else s.eos_penalty,
            temperature=s.temperature if temperature is None else temperature,
            seed=s.seed if seed is None else seed,
        )
        if not can.steps:  # the backend completes whole (a remote server): checked here, no samples
            done = b.complete(ctx, mode, max_tokens, steps, settings, deadline_ms, should_cancel, s, t0)
            if s.syntax_candidates > 0 and is_python(language) and done.text:
                done.text, done.syntax, _ = check(done.text, prefix, suffix, whole=file_start and file_end)
            return done
        first_allowed = b.tokens_starting_with(ctx.heal) if ctx.heal else None
        if can.line_rules and at_blank_line(prefix):
            # At a blank line an answer that first ends the line would be empty after post-processing
            # (nor may it end right after its indentation: ``open_line``).
            first_allowed = b.starts_line if first_allowed is None else first_allowed & b.starts_line
            settings = replace(settings, open_line=True)
        elif can.line_rules and mode == "line" and line_is_open(prefix[prefix.rfind("\n") + 1 :]):
            # Mid-line where the line cannot end yet (``x = ``, ``rv.``, ``for k in ``): nor may the answer.
            first_allowed = b.starts_line if first_allowed is None else first_allowed & b.starts_line
        python = is_python(language)
        checked = s.syntax_candidates > 0 and can.alternatives and settings.temperature == 0 and python
        t_draft0 = time.perf_counter()
        win = window(prefix, suffix, file_start and file_end) if checked else None  # the compiler's, once for all
        offers, draft_ids, spare = [], None, []
        if s.drafts and settings.temperature == 0 and can.drafts:
            # Where the compiler leaves one header to write (``else:``...), it goes first.
            headers = [Draft(h, "syntax", 1) for h in header_drafts(win, prefix, suffix)] if win is not None else []
            # On an import line, the names the document uses and nothing imports yet go first.
            whole = python and file_start and file_end
            try:
                imports = import_drafts(prefix, suffix, lambda: workspace_imports(lines, source)) if whole else []
            except Exception:  # drafts are a help: whatever goes wrong there, the model still answers
                imports = []
            imports = [Draft(text, "import", 1) for text in imports]
            cheap = (*imports, *headers, *drafts, *self.previous.drafts(source, prefix))
            wanted = max(s.draft_candidates, alternatives)
            found = find_drafts(prefix, suffix, lines, source, wanted + (DRAFTS_IN_RESERVE if win else 0), cheap)
            if win is not None:  # a draft the compiler blames is wrong (or uses a name nothing binds): the next one
                found = _fitting(found, win, wanted, prefix, suffix, mode)
            # The model judges the first; the next ones are alternatives as they are, before any sample.
            offers, spare = found[: s.draft_candidates], found[s.draft_candidates :]
            line = "" if "\n" in ctx.heal else prefix[prefix.rfind("\n") + 1 : len(prefix) - len(ctx.heal)][-MAX_LINE:]
            # A line ends the span; a block's first line is drafted and the model writes the rest.
            end, tail = ([self.ids.eos], "") if mode == "line" else ([], "\n")
            draft_ids = [
                torch.tensor((draft_tokens(self.tok.encode, line, ctx.heal + d.text + tail) + end)[:canvas])
                for d in offers
            ] or None
        t_draft = time.perf_counter()
        kept: list[int] = []
        chosen: list[int] = []
        # The first step's prediction, for alternatives (asked for, or to replace an answer the compiler blames).
        first = [] if (alternatives > 1 or (checked and repair_samples)) and can.alternatives else None
        report = None
        if on_step is not None and can.on_step:

            def report(step: int, x: torch.Tensor) -> None:
                on_step(step, self.canvas_text(x[0], ctx.heal))

        deadline = None if deadline_ms is None else t0 + deadline_ms / 1000.0
        should_stop = None if deadline is None else (lambda: time.perf_counter() >= deadline)
        t1 = time.perf_counter()
        with self.lock, torch.inference_mode():
            if should_cancel is not None and should_cancel():
                raise Cancelled
            t_locked = time.perf_counter()
            kv, cache_state = b.encode(ctx)
            t2 = time.perf_counter()
            step_times: list[float] = []
            out, ran = diffuse(
                b.model,
                kv,
                canvas,
                self.ids,
                settings,
                should_stop,
                should_cancel,
                first_allowed,
                step_times,
                draft_ids,
                s.draft_threshold,
                kept,
                first_probs=first,
                on_step=report,
                draft_veto=s.draft_veto,
                draft_conditioned=s.draft_batch,
                draft_chosen=chosen,
            )
            t3 = time.perf_counter()
            sampled = None
            if first is not None:
                sampled = replace(
                    settings, temperature=ALTERNATIVE_TEMPERATURE, top_k=ALTERNATIVE_TOP_K, seed=settings.seed or 0
                )
            span = span_tokens(out[0], self.ids.eos)
            raw = self.tok.decode(span)
            after_cursor = raw[len(ctx.heal) :] if raw.startswith(ctx.heal) else raw
            t4 = time.perf_counter()
            text = postprocess(after_cursor, prefix, suffix, mode)
            drafted = _usable(spare, text, prefix, suffix, mode, win)
            t_alt0 = time.perf_counter()
            rows = None
            if alternatives - 1 > len(drafted) and first is not None:  # samples for the places drafts left
                rows = self._alternatives(
                    kv, ctx, canvas, sampled, alternatives - 1 - len(drafted), first, first_allowed, mode,
                    should_stop, should_cancel,
                )  # fmt: skip
            t_alt = time.perf_counter()
            others = () if rows is None else tuple(self._text(row, ctx.heal, prefix, suffix, mode) for row in rows)
            t5 = time.perf_counter()
            verdict = ""
            if checked:  # under the lock: a blamed answer's replacements decode on the same keys/values
                # As many slots as syntax_candidates line canvases: fewer samples of a block's larger canvas.
                samples = max(1, -(-s.syntax_candidates * s.canvas_line // canvas))

                def sample() -> list[str]:
                    if not repair_samples or first is None:
                        return []
                    drawn = self._alternatives(
                        kv, ctx, canvas, sampled, samples, first, first_allowed, mode, should_stop, should_cancel
                    )
                    return [self._text(row, ctx.heal, prefix, suffix, mode) for row in drawn]

                # Only samples may replace a blamed answer (a draft the model never judged may not).
                text, verdict, win = check(text, prefix, suffix, others, sample, win)
                # Alternatives the user asked for: none the compiler blames either.
                others = tuple(o for o in others if o != text and judge(win, o) != BLAMED)
            others = tuple(d for d in drafted if d != text) + others
        t6 = time.perf_counter()
        timings = {
            "tokenize": (t_draft0 - t0) * 1e3,
            "draft": (t_draft - t_draft0) * 1e3,
            "queue": (t_locked - t1) * 1e3,
            "context_encode": (t2 - t_locked) * 1e3,
            "refine": (t3 - t2) * 1e3,
            "detokenize": (t4 - t3) * 1e3,
            "postprocess": (t_alt0 - t4 + t5 - t_alt) * 1e3,
            "syntax": (t6 - t5) * 1e3,
            "total": (t6 - t0) * 1e3,
        }
        timings["steps"] = [round(t * 1e3, 3) for t in step_times]
        if alternatives > 1:
            timings["alternatives"] = (t_alt - t_alt0) * 1e3  # their decode; their post-processing is in postprocess
        offered = None
        if offers:
            pick = chosen[0] if chosen else 0
            offered = {
                "source": offers[pick].source,
                "votes": offers[pick].count,
                "tokens": int(draft_ids[pick].numel()),
                "kept": kept[0] if kept else 0,
                "candidates": len(offers),
            }
        if can.drafts:
            self.previous.record(source, prefix, text)
        return Completion(
            text, mode, ran, len(span), cache_state, len(ctx.tokens), timings, raw, ctx.heal, ctx.snippet_tokens,
            offered, others, verdict,
        )  # fmt: skip

    @contextmanager
    def using_cache(self, cache: ContextCache):
        """Contexts encoded into and looked up in ``cache`` instead of the engine's own, meanwhile (a
        server keeps one per client); for the one thread that completes meanwhile.  A backend that
        keeps no contexts (``supports.caching`` false) keeps its own."""
        if not self.supports.caching:
            yield
            return
        with self.lock:
            own, self.impl.cache = self.impl.cache, cache
        try:
            yield
        finally:
            with self.lock:
                self.impl.cache = own

    def _alternatives(
        self, kv, ctx, canvas: int, settings: DecodeSettings, n: int, first: list, first_allowed, mode: str,
        should_stop, should_cancel,
    ) -> torch.Tensor:  # fmt: skip
        """``n`` sampled canvases (n, canvas) of the context whose state ``kv`` the first decode used,
        from that decode's first step: one batch sharing the cached context's keys/values, or one
        canvas at a time where the model's graphs take a single canvas (the ONNX backend)."""
        # An alternative never starts by ending the span (nor a line by ending the line): it would be empty.
        allowed = torch.ones(first[0].shape[-1], dtype=torch.bool, device=first[0].device)
        allowed[self.ids.eos] = False
        if mode == "line" and self.supports.line_rules:
            allowed &= self.impl.starts_line
        if first_allowed is not None:
            allowed &= first_allowed

        model = self.impl.model
        batch = self.impl.alternatives_state(ctx, kv, n)
        if batch is not None:
            state, ids, shared = batch
            return diffuse(model, state, canvas, ids, settings, should_stop, should_cancel, allowed,
                           first_probs=first if shared else None)[0]  # fmt: skip
        return torch.cat([
            diffuse(model, kv, canvas, self.ids, replace(settings, seed=settings.seed + i), should_stop, should_cancel,
                    allowed, first_probs=first)[0]
            for i in range(n)
        ])  # fmt: skip

    def _text(self, row: torch.Tensor, heal: str, prefix: str, suffix: str, mode: str) -> str:
        """A canvas as the text an editor shows (as for the answer in ``complete``)."""
        raw = self.tok.decode(span_tokens(row, self.ids.eos))
        return postprocess(raw[len(heal) :] if raw.startswith(heal) else raw, prefix, suffix, mode)


def _fitting(found: Sequence[Draft], win: Window, wanted: int, prefix: str, suffix: str, mode: str) -> list[Draft]:
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


def _usable(spare: Sequence[Draft], text: str, prefix: str, suffix: str, mode: str, win) -> list[str]:
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
