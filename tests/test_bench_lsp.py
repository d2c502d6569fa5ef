from celeris_complete.bench.lsp import language_workspace, run, typing_sessions


def test_typing_sessions_come_from_real_files():
    for name, before, to_type in typing_sessions(5):
        assert name.endswith(".py") and before.endswith("\n") and to_type


def test_short_lsp_benchmark_runs(tiny_model_dir):
    trace = []
    result = run(str(tiny_model_dir), seconds=0, keys_per_second=20, trace=trace, min_keystrokes=8)  # 8 keys
    assert result["keystrokes"] >= 8
    # Every keystroke traced with the server's timings for that very request.
    assert len(trace) == result["keystrokes"] and all(t["ms"] > 0 for t in trace)
    sources = [t["timings"]["source"] for t in trace if t["timings"]]
    assert sources.count("model") == result["model_calls"] and set(sources) <= {"model", "typing-cache"}
    assert result["latency_ms"]["p50"] > 0 and 0 <= result["answered_before_next_key"] <= 1
    assert result["server_ready_s"] > 0 and result["rss_mb"]["end"] > 0


def test_lsp_benchmark_measures_invoked_requests_apart(tiny_model_dir):
    # 8 keys, however long they take (a 3 s run on a loaded machine once held fewer than 4: no invoked request)
    result = run(str(tiny_model_dir), seconds=0, keys_per_second=20, invoked_every=4, min_keystrokes=8)
    invoked = result["invoked"]
    assert invoked["requests"] >= 2 and invoked["alternatives"] == 3
    assert invoked["latency_ms"]["p50"] > 0 and 0 <= invoked["items_mean"] <= 3
    assert "invoked" not in run(str(tiny_model_dir), seconds=1, keys_per_second=20)


def test_another_language_types_its_bench_packages_files(tmp_path, monkeypatch, tiny_model_dir):
    """--language go: the largest Go package (here two made up, as fetched) is the workspace, its files are
    typed, the server is told the language."""
    from celeris_complete.bench import repo_languages

    roots = {}
    for name, size in (("golang-small-dev", 70), ("golang-large-dev", 140)):
        root = roots[name] = tmp_path / name
        root.mkdir()
        body = "".join(f"func f{i}() int {{ return {i} }}\n" for i in range(size))
        (root / "a.go").write_text("package a\n\n" + body)
        (root / "notes.md").write_text("# not Go\n" * 100)
    go = repo_languages.LANGUAGES["go"]
    packages = tuple(repo_languages.BenchPackage(name, "1", "MIT") for name in roots)
    monkeypatch.setitem(repo_languages.LANGUAGES, "go", repo_languages.BenchLanguage(
        go.name, go.language_id, go.suffixes, go.comments, go.registry, packages))  # fmt: skip
    monkeypatch.setattr(repo_languages, "fetch_source", lambda language, name, version: roots[name])
    root, files, language_id = language_workspace("go")
    assert root == roots["golang-large-dev"] and files == [root / "a.go"] and language_id == "go"
    assert {name for name, _, _ in typing_sessions(5, files=files, root=root)} == {"a.go"}
    trace = []
    result = run(str(tiny_model_dir), seconds=2, keys_per_second=20, trace=trace, language="go")
    assert result["keystrokes"] > 5 and len(trace) == result["keystrokes"]
    # The server was told the language: Go's parser judged the model's answers (these one-line functions
    # parse; as Python they would not compile, and the compiler keeps what it cannot judge).
    verdicts = [t["timings"].get("syntax") for t in trace if t["timings"] and t["timings"].get("source") == "model"]
    assert verdicts.count("ok") > verdicts.count("kept"), verdicts
