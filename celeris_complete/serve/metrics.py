"""The completion server's Prometheus metrics (``GET /metrics``), in a registry of their own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

if TYPE_CHECKING:
    from celeris_complete.engine import Completion

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PHASES = ("queue", "tokenize", "encode", "refine", "post")

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("celeris_requests", "HTTP requests answered.", ["endpoint", "status"], registry=r)
        self.latency = Histogram(
            "celeris_request_seconds",
            "Time from the request's arrival to the response's last byte.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.phase = Histogram(
            "celeris_phase_seconds",
            "Time per completion request in each phase (as in the Server-Timing header).",
            ["phase"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch = Histogram(
            "celeris_batch_size",
            "Requests decoded together: one observation per forward pass (batching), or per request (1).",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )
        self.cache = Counter("celeris_context_cache", "Context cache lookups by result.", ["result"], registry=r)
        self.tokens = Counter(
            "celeris_tokens", "Tokens: prompt (context the model saw) and completion.", ["kind"], registry=r
        )
        self.steps = Histogram(
            "celeris_refinement_steps", "Refinement steps per completion.", buckets=(1, 2, 4, 8, 16, 32, 64), registry=r
        )
        self.cancelled = Counter(
            "celeris_cancelled", "Requests stopped before their answer because the client left.", registry=r
        )
        self.queue_depth = Gauge("celeris_queue_depth", "Requests waiting for the model.", registry=r)
        self.ready = Gauge("celeris_model_ready", "1 once the model is loaded.", registry=r)
        for result in ("hit", "partial", "miss"):
            self.cache.labels(result)
        for kind in ("prompt", "completion"):
            self.tokens.labels(kind)

    def completed(self, phases_ms: dict[str, float], completions: list[Completion]) -> None:
        for name in PHASES:
            if name in phases_ms:
                self.phase.labels(name).observe(phases_ms[name] / 1e3)
        for c in completions:
            self.cache.labels(c.cache).inc()
            self.tokens.labels("prompt").inc(c.context_tokens)
            self.tokens.labels("completion").inc(c.tokens)
            self.steps.observe(c.steps)

    def render(self) -> bytes:
        return generate_latest(self.registry)
