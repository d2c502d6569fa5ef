"""A locust load test of ``celeris-complete serve``: each user sends its next fill-in-the-middle request
as soon as the last is answered, at places in real source files (as ``bench serve`` does).

Run through ``celeris-complete bench serve --locust`` (headless, loopback, a fixed time per level), or
by hand against a running server::

    locust -f benchmarks/locustfile.py --headless -u 16 -r 16 -t 20s --host http://127.0.0.1:8000

``CELERIS_BENCH_KEY`` (optional) is sent as the bearer token.
"""

from __future__ import annotations

import itertools
import os

from locust import FastHttpUser, constant, task

from celeris_complete.bench.serve import places

BODIES = places(200)
_start = itertools.count()


class Completer(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.next = next(_start) * 7919  # each user walks the places from another one
        key = os.environ.get("CELERIS_BENCH_KEY")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    @task
    def complete(self) -> None:
        body = BODIES[self.next % len(BODIES)]
        self.next += 1
        with self.client.post("/v1/fim/completions", json=body, headers=self.headers, catch_response=True) as r:
            if r.status_code != 200:
                r.failure(f"HTTP {r.status_code}")
