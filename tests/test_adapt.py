"""`celeris-complete adapt`: a copy of a model trained on one repository's own files."""

import json
import os
import shutil

import pytest

from celeris_complete.config import load_settings
from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import load_model_dir
from celeris_complete.training import adapt as adapt_mod
from celeris_complete.training.adapt import adapt, adapt_dir
from tests.conftest import STDLIB, TINY

TRAIN = {k: v for k, v in TINY.items() if k in ("batch_size", "max_suffix", "eval_every", "validation_every")}


def make_repo(root):
    """A small repository: real modules, one ignored by .gitignore, one secret, one not Python."""
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    for name in ("textwrap.py", "shlex.py", "fnmatch.py", "glob.py", "bisect.py"):
        (pkg / name).write_text((STDLIB / name).read_text(encoding="utf-8"), encoding="utf-8")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "generated.py").write_text("IGNORED_BY_GITIGNORE = 1\n" * 50)
    (root / "secret_settings.py").write_text("API_TOKEN = 'never read'\n" * 50)
    (root / "README.md").write_text("# not python\n")
    return root


def test_adapts_on_the_repositorys_files_only_and_outside_it(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "repo")
    # The budget is the whole process's, here a test session's (over 1.5 GB before adapting), not a CLI's.
    overrides = {"model": str(tiny_model_dir), "adapt_memory_mb": 16384}
    settings = load_settings(overrides, environ={}, user_file=tmp_path / "none")
    out = adapt(repo, settings, minutes=0.05, context_len=64, **TRAIN)
    assert str(out).startswith(str(tmp_path / "cache")) and out == adapt_dir(repo) / "model"
    assert not any(p.name == ".work" or p.suffix == ".safetensors" for p in repo.rglob("*"))
    manifest = json.loads((out / "corpus_manifest.json").read_text())["files"]
    used = sorted(r["path"].split("/", 1)[1] for r in manifest)
    assert used == ["pkg/bisect.py", "pkg/fnmatch.py", "pkg/glob.py", "pkg/shlex.py", "pkg/textwrap.py"]
    assert {r["split"] for r in manifest} == {"train", "validation"}  # five files are enough to hold one out
    adapted, base = load_model_dir(out), load_model_dir(tiny_model_dir)
    training = json.loads((out / "config.json").read_text())["training"]
    assert training["steps"] > 0 and training["init_from"]["path"] == str(tiny_model_dir)
    assert adapted.tokenizer.token_bytes == base.tokenizer.token_bytes
    assert any((a != b).any() for a, b in zip(adapted.model.state_dict().values(), base.model.state_dict().values()))


def test_too_little_code_is_a_clear_error(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "only.py").write_text("x = 1\n")
    settings = load_settings({"model": str(tiny_model_dir)}, environ={}, user_file=tmp_path / "none")
    with pytest.raises(CelerisError, match="at least 2"):
        adapt(tmp_path / "one", settings, minutes=0.05, **TRAIN)
    with pytest.raises(CelerisError, match="not a folder"):
        adapt(tmp_path / "missing", settings, minutes=0.05, **TRAIN)


def test_adaptation_trains_on_the_engines_context_with_a_cpu_batch(monkeypatch, tmp_path):
    """Not the base model's GPU batch (128 x 1,024): contexts as long as the engine's, 8,192 tokens a step."""
    from celeris_complete.training import adapt as adapt_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    settings = load_settings({}, user_file=tmp_path / "none.toml")
    assert adapt_module.adapt_context_len(settings, 1024) == 512  # 256 + 96 + 80 (+ markers)
    assert adapt_module.adapt_context_len(settings, 384) == 384  # never longer than the model's
    longer = settings.with_overrides({"prefix_tokens": 900}, "test")
    assert adapt_module.adapt_context_len(longer, 1024) == 1024
    seen = {}
    monkeypatch.setattr(adapt_module, "train", lambda args: seen.setdefault("args", args))
    monkeypatch.setattr(adapt_module, "load_model_dir", lambda path: type("M", (), {"meta": GPU_META})())
    monkeypatch.setattr(adapt_module, "snapshot", lambda *a: ["a.py", "b.py"])
    adapt(tmp_path, settings.with_overrides({"adapt_memory_mb": 1500}, "test"), 1.0, check_batches=0)
    args = seen["args"]
    assert (args.batch_size, args.context_len, args.memory_mb) == (16, 512, 1500.0)


GPU_META = {"context_len": 1024, "training": {"batch_size": 128, "args": {"max_suffix": 128}}}


def test_a_step_budget_trains_that_many_steps_whatever_the_minutes(tiny_model_dir, tmp_path, monkeypatch):
    """`adapt --steps N` (bench adapt's reproducible runs): N steps, with the schedule over them, not the clock."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "repo")
    overrides = {"model": str(tiny_model_dir), "adapt_memory_mb": 16384}
    settings = load_settings(overrides, environ={}, user_file=tmp_path / "none")
    niceness = os.nice(0)
    out = adapt(repo, settings, minutes=60, steps=3, check_batches=0, context_len=64, **TRAIN)
    training = json.loads((out / "config.json").read_text())["training"]
    assert training["steps"] == 3
    # Low priority is the `adapt` command's, never its caller's (a test worker, here, lowered once
    # for the rest of the run, starved the timing-bound tests after it).
    assert os.nice(0) == niceness


def test_replay_adds_files_the_base_model_saw_to_the_training_side_only(tiny_model_dir, tmp_path, monkeypatch):
    """`adapt --replay S`: standard-library files from the base model's training split join the training
    text as about S of it; the held-out files (the check's) stay the repository's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "repo")
    seen = tmp_path / "stdlib"
    seen.mkdir()
    names = ("textwrap.py", "calendar.py", "colorsys.py", "keyword.py", "operator.py", "queue.py", "sched.py")
    for name in names:  # textwrap.py is also in the repository: never replayed
        shutil.copyfile(STDLIB / name, seen / name)
    monkeypatch.setattr(adapt_mod, "corpus_default_roots", lambda: [seen])
    settings = load_settings(
        {"model": str(tiny_model_dir), "adapt_memory_mb": 16384}, environ={}, user_file=tmp_path / "n"
    )
    out = adapt(repo, settings, minutes=60, steps=1, check_batches=0, context_len=64, replay=0.5, **TRAIN)
    files = json.loads((out / "corpus_manifest.json").read_text())["files"]
    replayed = [f for f in files if f["path"].startswith("stdlib/")]
    own = [f for f in files if not f["path"].startswith("stdlib/")]
    assert replayed and all(f["split"] == "train" for f in replayed)
    assert "stdlib/textwrap.py" not in {f["path"] for f in replayed}
    own_train = sum(f["bytes"] for f in own if f["split"] == "train")
    assert sum(f["bytes"] for f in replayed) >= own_train  # half of the training text, or all there is
    assert any(f["split"] == "validation" for f in own)
    training = json.loads((out / "config.json").read_text())["training"]
    assert training["args"]["replay_share"] == 0.5 and training["replay_roots"] == [str(seen)]
    tokens = {"replay": (out / ".work" / "train.bin").stat().st_size}
    # Without replay, the same repository trains on its own files only: about half the tokens.
    out = adapt(repo, settings, minutes=60, steps=1, check_batches=0, context_len=64, fresh=True, **TRAIN)
    files = json.loads((out / "corpus_manifest.json").read_text())["files"]
    assert not [f for f in files if f["path"].startswith("stdlib/")]
    tokens["own"] = (out / ".work" / "train.bin").stat().st_size
    assert tokens["replay"] > 1.8 * tokens["own"], tokens
