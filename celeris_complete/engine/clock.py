"""The times a completion's stages start and end, and the phases the timings report from them."""

from __future__ import annotations

import time


class Clock:
    __slots__ = ("t0", "marks")

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.marks: dict[str, float] = {}

    def mark(self, name: str) -> None:
        self.marks[name] = time.perf_counter()

    def timings_ms(self, step_times: list[float], alternatives: bool) -> dict:
        """Per phase, in milliseconds: the keys selftest, the server's metrics and ``bench`` read.
        ``postprocess`` holds the answer's and the sampled alternatives' post-processing."""
        m, t0 = self.marks, self.t0
        timings = {
            "tokenize": (m["drafting"] - t0) * 1e3,
            "draft": (m["drafted"] - m["drafting"]) * 1e3,
            "queue": (m["locked"] - m["queued"]) * 1e3,
            "context_encode": (m["encoded"] - m["locked"]) * 1e3,
            "refine": (m["refined"] - m["encoded"]) * 1e3,
            "detokenize": (m["detokenized"] - m["refined"]) * 1e3,
            "postprocess": (m["sampling"] - m["detokenized"] + m["checking"] - m["sampled"]) * 1e3,
            "syntax": (m["done"] - m["checking"]) * 1e3,
            "total": (m["done"] - t0) * 1e3,
            "steps": [round(t * 1e3, 3) for t in step_times],
        }
        if alternatives:
            timings["alternatives"] = (m["sampled"] - m["sampling"]) * 1e3  # their decode
        return timings
