import json
import subprocess
import sys

from celeris_complete.bench.selftest import percentile, render, run_selftest, sample_cursors
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine


def test_percentile():
    values = list(range(1, 101))
    assert percentile(values, 50) in (50, 51) and percentile(values, 99) == 99 and percentile(values, 100) == 100


def test_cursors_are_real_places():
    for text, at, mode in sample_cursors(20):
        assert 0 < at < len(text) and mode in ("line", "block")


def test_report_and_verdict(tiny_model_dir):
    engine = Engine(load_settings({"model": str(tiny_model_dir)}, environ={}, user_file=tiny_model_dir / "x"))
    generous = run_selftest(engine, budget_ms=60_000, requests=4, keystrokes=2)
    assert generous["verdict"] == "pass" and generous["advice"] == []
    assert generous["keystroke_ms"]["n"] == 8 and generous["cache_miss_ms"]["n"] == 4
    long = generous["long_context_ms"]  # the tiny model holds less than 1k tokens: its limit is used
    assert long["n"] == 4 and 0.5 * long["model_max_context"] <= long["context_tokens_p50"]  # short suffixes too
    assert long["context_tokens_p50"] <= long["model_max_context"] < 1024
    assert generous["cache"]["misses"] >= 4 and generous["cache"]["hits"] + generous["cache"]["partial"] >= 8
    # Keystrokes reuse the cached context (the cache's counts above); the report times both encodings
    # (comparing those sub-millisecond times here failed on a loaded machine: a timing is not a test).
    assert {"context_encode_keystroke", "context_encode"} <= set(generous["phases_ms_p50"])
    strict = run_selftest(engine, budget_ms=0.001, requests=4, keystrokes=1)
    assert strict["verdict"] == "fail" and strict["advice"]
    assert "FAIL" in render(strict) and "try:" in render(strict)


def test_advice_names_tracing_and_int8_when_they_are_off(tiny_model_dir):
    values = {"model": str(tiny_model_dir), "trace": False, "quant": "none"}
    engine = Engine(load_settings(values, environ={}, user_file=tiny_model_dir / "x"))
    strict = run_selftest(engine, budget_ms=0.001, requests=4, keystrokes=1, long_requests=0)
    assert "run the model as traced graphs: trace = true" in strict["advice"]
    assert any("--quant int8" in tip for tip in strict["advice"])


def test_cli_exit_code_and_json(tiny_model_dir):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "celeris_complete.cli",
            "selftest",
            "--model",
            str(tiny_model_dir),
            "--requests",
            "4",
            "--budget-ms",
            "60000",
            "--json",
        ],
        capture_output=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "pass"


def test_long_context_fills_the_shipped_model_up_to_1k_tokens(shipped_model_dir):
    from celeris_complete.bench.selftest import LONG_CONTEXT, long_context_latency

    engine = Engine(load_settings({"model": str(shipped_model_dir)}, environ={}, user_file=shipped_model_dir / "x"))
    before = engine.settings
    long = long_context_latency(engine, requests=3)
    expected = min(LONG_CONTEXT, engine.max_context - 8)
    assert long["n"] == 3 and 0.6 * expected <= long["context_tokens_p50"] <= expected
    assert engine.settings is before  # the measurement's wide budget is gone again


def test_cursors_deep_in_files():
    for text, at, _ in sample_cursors(6, seed=1, min_offset=6000):
        assert 6000 <= at < len(text)


def test_selftest_reports_which_tier_answers(shipped_model_dir):
    """min_confidence 1: every local answer is unsure, so each goes to the second tier (a local server
    answering with one line); a tier that is down fails each time, its error said once."""
    from tests.second_tier import SecondTier
    from tests.test_serve import refused_port

    server, url = SecondTier.start()
    try:
        values = {"model": str(shipped_model_dir), "min_confidence": 1.0, "escalate_endpoint": url, "threads": 1}
        engine = Engine(load_settings(values, environ={}, user_file=shipped_model_dir / "x"))
        result = run_selftest(engine, budget_ms=60_000, requests=4, keystrokes=1, long_requests=0)
    finally:
        server.shutdown()
    local, second = result["tiers"]["local"], result["tiers"]["second"]
    assert local["answers"] >= 1 and local["unsure"] == local["answers"]
    assert second["endpoint"] == url and second["asked"] == second["answered"] == local["unsure"]
    assert second["failed"] == 0 and second["p50_ms"] is not None
    assert f"second tier {url}: asked {second['asked']}, answered {second['answered']}" in render(result)
    with refused_port() as port:
        values["escalate_endpoint"] = f"http://127.0.0.1:{port}"
        engine = Engine(load_settings(values, environ={}, user_file=shipped_model_dir / "x"))
        down = run_selftest(engine, budget_ms=60_000, requests=4, keystrokes=1, long_requests=0)["tiers"]["second"]
    assert down["failed"] == down["asked"] >= 1 and down["answered"] == 0
    assert len(down["errors"]) == 1 and "cannot connect" in down["errors"][0]
    # Without a second tier: the local answers, and how many were unsure.
    engine = Engine(load_settings({"model": str(shipped_model_dir)}, environ={}, user_file=shipped_model_dir / "x"))
    alone = run_selftest(engine, budget_ms=60_000, requests=4, keystrokes=1, long_requests=0)["tiers"]
    assert alone["second"] is None and alone["local"]["answers"] >= 1
