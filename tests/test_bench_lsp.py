from celeris_complete.bench.lsp import run, typing_sessions


def test_typing_sessions_come_from_real_files():
    for name, before, to_type in typing_sessions(5):
        assert name.endswith(".py") and before.endswith("\n") and to_type


def test_short_lsp_benchmark_runs(tiny_model_dir):
    trace = []
    result = run(str(tiny_model_dir), seconds=3, keys_per_second=20, trace=trace)
    assert result["keystrokes"] > 5
    # Every keystroke traced with the server's timings for that very request.
    assert len(trace) == result["keystrokes"] and all(t["ms"] > 0 for t in trace)
    sources = [t["timings"]["source"] for t in trace if t["timings"]]
    assert sources.count("model") == result["model_calls"] and set(sources) <= {"model", "typing-cache"}
    assert result["latency_ms"]["p50"] > 0 and 0 <= result["answered_before_next_key"] <= 1
    assert result["server_ready_s"] > 0 and result["rss_mb"]["end"] > 0


def test_lsp_benchmark_measures_invoked_requests_apart(tiny_model_dir):
    result = run(str(tiny_model_dir), seconds=3, keys_per_second=20, invoked_every=4)
    invoked = result["invoked"]
    assert invoked["requests"] >= 1 and invoked["alternatives"] == 3
    assert invoked["latency_ms"]["p50"] > 0 and 0 <= invoked["items_mean"] <= 3
    assert "invoked" not in run(str(tiny_model_dir), seconds=1, keys_per_second=20)
