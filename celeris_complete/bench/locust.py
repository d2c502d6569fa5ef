"""`celeris-complete bench serve --locust`: the same levels as ``bench serve``, the load driven by locust
(benchmarks/locustfile.py, headless, one run of fixed duration per level) against a server on a free
loopback port (or ``url``).  Percentiles and throughput come from locust's own statistics (it rounds
times above 100 ms to 2 significant digits)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from celeris_complete.bench.serve import start_server

LOCUSTFILE = Path(__file__).resolve().parents[2] / "benchmarks" / "locustfile.py"


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:  # "N/A": no request finished
        return float("nan")


def level(url: str, users: int, seconds: float, out: Path, api_key: str | None) -> dict:
    prefix = out / f"u{users}"
    env = {**os.environ, "CELERIS_BENCH_KEY": api_key or ""}
    args = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary", "--host", url,
        "-u", str(users), "-r", str(users), "-t", f"{seconds:g}s", "--csv", str(prefix), "--stop-timeout", "30",
        "--loglevel", "WARNING",
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=seconds + 120)
    stats = prefix.with_name(prefix.name + "_stats.csv")
    if not stats.exists():
        raise RuntimeError(f"locust failed ({done.returncode}): {done.stderr[-2000:]}")
    with stats.open() as f:
        total = next(row for row in csv.DictReader(f) if row["Name"] == "Aggregated")
    requests, failures = int(total["Request Count"]), int(total["Failure Count"])
    failed_by: dict[str, int] = {}
    errors = prefix.with_name(prefix.name + "_failures.csv")
    if errors.exists():
        with errors.open() as f:
            for row in csv.DictReader(f):
                failed_by[row["Error"]] = failed_by.get(row["Error"], 0) + int(row["Occurrences"])
    return {
        "clients": users,
        "requests": requests,
        "failures": failures,
        "failed_by": failed_by,  # locust's error text ("HTTP 504", or the client's exception) -> count
        "throughput_rps": round(float(total["Requests/s"]) * (requests - failures) / max(1, requests), 2),
        "p50_ms": number(total["50%"]),
        "p95_ms": number(total["95%"]),
        "p99_ms": number(total["99%"]),
    }


def run(
    levels: list[int], seconds: float, url: str | None = None, model: str | None = None, api_key: str | None = None,
    progress=None, threads: int | None = None, batch: bool | None = None, quant: str | None = None,
) -> dict:  # fmt: skip
    proc = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if url is None:
                proc, url = start_server(model, max(64, max(levels)), Path(tmp) / "server.log", threads, batch, quant)
            headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
            health = httpx.get(url + "/health", timeout=10, headers=headers).json()
            level(url, 1, 2.0, Path(tmp), api_key)  # warm-up: traced graphs, caches
            rows = []
            for users in levels:
                if progress:
                    progress(f"locust: {users} user(s) for {seconds:g} s")
                rows.append(level(url, users, seconds, Path(tmp), api_key))
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
    return {"server": health, "batching": health.get("batching", False), "seconds_per_level": seconds,
            "driver": "locust", "rows": rows}  # fmt: skip


def table(result: dict) -> str:
    lines = ["| users | requests | failed | throughput (req/s) | p50 ms | p95 ms | p99 ms |", "|" + " --- |" * 7]
    for r in result["rows"]:
        lines.append(
            f"| {r['clients']} | {r['requests']} | {r['failures']} | {r['throughput_rps']} | {r['p50_ms']:g} "
            f"| {r['p95_ms']:g} | {r['p99_ms']:g} |"
        )
    return "\n".join(lines)
