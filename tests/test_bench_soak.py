"""The soak benchmark's machinery, on a run of seconds with the tiny model (the 10-minute figures are in
docs/reliability.md)."""

from celeris_complete.bench.soak import run, summarise, table, verdict


def test_a_short_soak_with_the_workspace_changing(tiny_model_dir):
    result = run(
        str(tiny_model_dir),
        seconds=12,
        changing=True,
        window_s=4,
        sample_s=2,
        change_every_s=0.5,
        big_files=40,
    )
    assert result["keystrokes"] > 50 and [m["minute"] for m in result["per_minute"]] == [1, 2, 3]
    assert all(m["p50"] > 0 for m in result["per_minute"])
    samples = result["samples"]
    assert len(samples) >= 6 and all(s["rss_mb"] > 0 and s["threads"] > 1 and s["fds"] > 2 for s in samples)
    changes = result["workspace_changes"]
    # The watcher saw the large folder (40 files) come and go, each time: the run waited (up to 2 minutes)
    # for the server's index to hold all but two of its files, then to have let go of them.
    indexed_s, dropped_s = changes["big_folder_indexed_s"], changes["big_folder_dropped_s"]
    print(f"large folder indexed after {indexed_s} s, dropped after {dropped_s} s")
    assert len(indexed_s) == 2 and None not in indexed_s, changes
    assert len(dropped_s) == 2 and None not in dropped_s, changes
    # (Small changes happen between the large folder's: how many depends on how long indexing took.)
    assert changes["created"] >= 1 and changes["big_folder_added"] == 2 and changes["big_folder_removed"] == 2
    assert "| 3 |" in table(result)


def test_the_targets_are_judged_from_minute_one():
    samples = [
        {"t": 0, "rss_mb": 100, "threads": 5, "fds": 9},
        {"t": 60, "rss_mb": 200, "threads": 8, "fds": 10},
        {"t": 600, "rss_mb": 215, "threads": 8, "fds": 11},
    ]
    minutes = summarise([(1, 10.0), (2, 30.0), (590, 12.0), (595, 35.0)], 60, 0.05)
    assert [m["minute"] for m in minutes] == [1, 10]
    t = verdict(samples, minutes, 60)
    assert t["rss_growth_minute1_to_end"] == 0.075 and t["memory_ok"]
    assert t["threads_ok"] and not t["fds_ok"] and t["fds_minute1_then_max"] == [10, 11]
    assert t["p99_ok"] and abs(t["p99_last_vs_first_minute"] - 0.0) < 0.2


def test_a_keystroke_sent_as_the_run_ends_counts_in_the_last_window():
    latencies = [(0.5, 10.0), (5.0, 20.0), (11.9, 30.0), (12.01, 40.0)]
    assert [m["minute"] for m in summarise(latencies, 4, 0.05, seconds=12)] == [1, 2, 3]
    assert summarise(latencies, 4, 0.05, seconds=12)[-1]["keystrokes"] == 2
    assert [m["minute"] for m in summarise(latencies, 4, 0.05)] == [1, 2, 3, 4]
