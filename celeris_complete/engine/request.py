"""What a completion is asked with (``InfillRequest``) and what is decided before the model runs
(``SpanPlan``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a request is built without loading torch (a server binds its port first)
    import torch

    from celeris_complete.checks.languages import Language
    from celeris_complete.drafts.table import Draft, LineTable
    from celeris_complete.model.diffusion import DecodeSettings


@dataclass(frozen=True, slots=True)
class InfillRequest:
    """Complete at the cursor between ``prefix`` and ``suffix``; every other field has a default.

    ``deadline_ms`` makes the answer anytime: the remaining slots are committed when it passes.
    ``should_cancel()`` is asked between steps; yes raises ``Cancelled``.  ``file_start``/``file_end``
    say whether ``prefix``/``suffix`` reach the file's start/end (callers may pass a slice of a huge
    document around the cursor).  ``snippets``: text from other files that may help, most relevant
    first.  ``lines``: the workspace's lines, for drafts (``source`` is the document's key there, left
    out of its own drafts); ``drafts``: cheaper drafts found by the caller (the language server's typing
    cache), tried first.  ``alternatives`` > 1: also that many completions less one
    (``Completion.alternatives``): the next drafts as ranked, then samples; the answer itself is the
    same as without them (except where the compiler blames it mid-line: then the samples are tried as
    its replacement).  ``on_step(step, text)`` sees the whole canvas as text after every refinement
    step, before post-processing.  ``language`` (an LSP language id or a file name): an answer
    Python's compiler or the language's parser blames is repaired, or replaced by a sampled one that
    parses (setting ``syntax_candidates``; see ``checks/syntax.py``, ``checks/grammar.py``);
    ``repair_samples`` False: by no newly sampled one.
    """

    prefix: str
    suffix: str
    mode: str | None = None  # "line" or "block"; None: the settings', then the cursor's
    max_tokens: int | None = None
    steps: int | None = None
    deadline_ms: float | None = None
    should_cancel: Callable[[], bool] | None = None
    threshold: float | None = None
    file_start: bool = True
    file_end: bool = True
    temperature: float | None = None
    seed: int | None = None
    snippets: Sequence[str] = ()
    lines: LineTable | None = None
    source: str | None = None
    alternatives: int = 1
    on_step: Callable[[int, str], None] | None = None
    drafts: Sequence[Draft] = ()
    language: str | None = None
    repair_samples: bool = True

    @property
    def whole_file(self) -> bool:
        return self.file_start and self.file_end


@dataclass(slots=True)
class SpanPlan:
    """The span to write and how, decided before the model runs."""

    mode: str
    canvas: int  # slots of the span canvas
    prefix_budget: int  # context tokens
    suffix_budget: int
    snippet_budget: int
    decode: DecodeSettings
    first_allowed: torch.Tensor | None = None  # tokens the span may start with (None: any)
    python: bool = False
    checked: bool = False  # the compiler or the language's parser judges the answer (greedy, samples possible)
    language: Language | None = None  # the document's (checks/languages.py), None when not known
    policy: str = "model"  # what may be shown: "model", "drafts" (a draft accepted whole) or "off" (languages.policy)
