"""The completion pipeline: from the text around the cursor to the answer shown.  ``Engine``
(pipeline) runs the stages in order: plan, drafting, decode, checking, answer; a request is an
``InfillRequest`` (request), its timings a ``Clock`` (clock).

``Engine``, ``Completion``, ``Cancelled`` and ``InfillRequest`` may be imported from here; the engine's
modules (and torch) load when one of the first three is first asked for, so that a server or a
language server can build requests and bind its port before the model and torch are loaded.

May import: backends, drafts, checks, model, system, and celeris_complete.errors and .config.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from celeris_complete.engine.request import InfillRequest

if TYPE_CHECKING:
    from celeris_complete.engine.pipeline import Cancelled, Completion, Engine

__all__ = ["Cancelled", "Completion", "Engine", "InfillRequest"]


def __getattr__(name: str):
    if name in ("Cancelled", "Completion", "Engine"):
        from celeris_complete.engine import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
