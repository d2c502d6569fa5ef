import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import load_model_dir
from celeris_complete.training.train import TrainArgs, train
from tests.conftest import TINY

TINY_DATA = {k: v for k, v in TINY.items() if k not in ("d_model", "n_layers", "n_heads")}  # for --init-from


def test_pipeline_writes_a_loadable_model_dir(tiny_model_dir):
    loaded = load_model_dir(tiny_model_dir)
    cfg = json.loads((tiny_model_dir / "config.json").read_text())
    training = cfg["training"]
    assert training["steps"] == 4 and training["tokens_seen"] > 0
    assert set(training["validation"]) >= {"masked_acc", "content_acc", "exact_match", "empty_rate"}
    manifest = json.loads((tiny_model_dir / "corpus_manifest.json").read_text())["files"]
    assert {r["split"] for r in manifest} == {"train", "validation"}
    assert loaded.model.num_parameters() == training["parameters"]


def test_same_seed_same_weights(small_corpus, tmp_path):
    a = train(TrainArgs(output=tmp_path / "a", roots=[small_corpus], steps=3, **TINY))
    b = train(TrainArgs(output=tmp_path / "b", roots=[small_corpus], steps=3, **TINY))
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert all((wa[k] == wb[k]).all() for k in wa)


def test_threads_are_the_runs_and_the_callers_come_back(small_corpus, tmp_path):
    import torch

    before = torch.get_num_threads()
    out = train(TrainArgs(output=tmp_path / "one", roots=[small_corpus], steps=2, threads=1, **TINY))
    assert json.loads((out / "config.json").read_text())["training"]["threads"] == 1
    assert torch.get_num_threads() == before
    with pytest.raises(CelerisError, match="threads"):
        train(TrainArgs(output=tmp_path / "bad", roots=[small_corpus], steps=2, threads=-1, **TINY))


def test_interrupted_run_resumes_to_the_same_weights(small_corpus, tmp_path, monkeypatch):
    from celeris_complete.training import train as train_module

    straight = train(TrainArgs(output=tmp_path / "straight", roots=[small_corpus], steps=4, **TINY))
    out = tmp_path / "m"
    real_step = train_module.accumulate
    calls = {"n": 0}

    def interrupted(*args, **kwargs):  # the third training step (the memory plan's passes aside)
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(train_module, "accumulate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(TrainArgs(output=out, roots=[small_corpus], steps=4, checkpoint_minutes=0, **TINY))
    assert (out / ".work" / "checkpoint.safetensors").exists()
    assert not (out / "model.safetensors").exists()
    assert not list(out.rglob("*.tmp")), "checkpoints are written then renamed"
    monkeypatch.setattr(train_module, "accumulate", real_step)
    train(TrainArgs(output=out, roots=[small_corpus], steps=4, **TINY))
    assert json.loads((out / "config.json").read_text())["training"]["steps"] == 4
    wa = load_file(str(out / "model.safetensors"))
    wb = load_file(str(straight / "model.safetensors"))
    for k in wa:
        assert (wa[k] == wb[k]).all(), k


def test_init_from_continues_a_model_on_longer_contexts(tiny_model_dir, small_corpus, tmp_path, monkeypatch):
    import torch

    from celeris_complete.training import data

    drawn = []
    real_sample = data.SpanSampler.sample

    def recording(self, rng, batch, canvas):
        drawn.append((self.context_len, batch))
        return real_sample(self, rng, batch, canvas)

    monkeypatch.setattr(data.SpanSampler, "sample", recording)
    base = load_model_dir(tiny_model_dir)
    args = {**TINY_DATA, "context_len": [64, 256], "lr": 1e-12}  # a negligible rate: the weights stay the start's
    out = train(TrainArgs(output=tmp_path / "x", roots=[small_corpus], steps=8, init_from=tiny_model_dir, **args))
    assert {(64, 2), (256, 1)} <= set(drawn)  # both lengths, the longer in smaller batches
    grown = load_model_dir(out)
    assert grown.config.max_positions >= 256 + 64 > base.config.max_positions
    assert {**grown.config.to_dict(), "max_positions": 0} == {**base.config.to_dict(), "max_positions": 0}
    assert grown.tokenizer.token_bytes == base.tokenizer.token_bytes
    start = base.model.state_dict()
    for name, tensor in grown.model.state_dict().items():
        assert torch.allclose(tensor, start[name], atol=1e-6), name
    training = json.loads((out / "config.json").read_text())["training"]
    assert training["init_from"]["path"] == str(tiny_model_dir) and training["init_from"]["steps"] == 4
    assert training["context_lens"] == {"64": 2, "256": 1} and training["context_len"] == 256


def test_init_from_keeps_the_starting_models_decoding_settings(tiny_model_dir, small_corpus, tmp_path):
    import shutil

    start = tmp_path / "start"
    shutil.copytree(tiny_model_dir, start)
    config = json.loads((start / "config.json").read_text())
    config["decode"] = {"steps": 3, "eos_penalty": 1.0}
    (start / "config.json").write_text(json.dumps(config))
    out = train(TrainArgs(output=tmp_path / "m", roots=[small_corpus], steps=1, init_from=start, **TINY_DATA))
    assert json.loads((out / "config.json").read_text())["decode"] == {"steps": 3, "eos_penalty": 1.0}


def test_init_from_refuses_data_of_another_tokenizer(tiny_model_dir, small_corpus, tmp_path):
    out = tmp_path / "m"
    train(TrainArgs(output=out, roots=[small_corpus], steps=1, **{**TINY, "vocab_size": 620}))
    with pytest.raises(CelerisError, match="another tokenizer"):
        train(TrainArgs(output=out, roots=[small_corpus], steps=2, init_from=tiny_model_dir, **TINY_DATA))
    with pytest.raises(CelerisError, match="keeps the starting model's architecture"):
        train(TrainArgs(output=tmp_path / "n", roots=[small_corpus], steps=2, init_from=tiny_model_dir, **TINY))


def test_resume_refuses_other_run_settings(small_corpus, tmp_path):
    out = tmp_path / "m"
    train(TrainArgs(output=out, roots=[small_corpus], steps=1, **TINY))
    with pytest.raises(CelerisError, match="context_lens"):
        train(TrainArgs(output=out, roots=[small_corpus], steps=2, **{**TINY, "context_len": [64, 128]}))
    with pytest.raises(CelerisError, match="too short"):
        train(TrainArgs(output=tmp_path / "n", roots=[small_corpus], steps=1, **{**TINY, "context_len": 10}))


def test_empty_corpus_fails_clearly(tmp_path):
    (tmp_path / "src").mkdir()
    with pytest.raises(CelerisError, match="corpus is empty"):
        train(TrainArgs(output=tmp_path / "m", roots=[tmp_path / "src"], steps=1, **TINY))


def test_needs_a_budget(small_corpus, tmp_path):
    with pytest.raises(CelerisError, match="budget"):
        train(TrainArgs(output=tmp_path / "m", roots=[small_corpus], **TINY))


def test_eval_reproduces_the_recorded_validation_figures(tiny_model_dir, small_corpus):
    from celeris_complete.training.validation import validate_model_dir

    recorded = json.loads((tiny_model_dir / "config.json").read_text())["training"]["validation"]
    again = validate_model_dir(tiny_model_dir, [small_corpus], batches=16)
    assert {k: again[k] for k in recorded} == recorded
    assert again["files_found"] == again["files_listed"] > 0


def test_eval_on_another_runs_held_out_tokens(tiny_model_dir, small_corpus):
    from celeris_complete.training.validation import validate_model_dir

    val_bin = tiny_model_dir / ".work" / "val.bin"  # the training run's own held-out tokens
    figures = validate_model_dir(tiny_model_dir, batches=2, tokens_file=val_bin)
    assert figures["tokens_file"] == str(val_bin) and figures["tokens"] > 0
    with pytest.raises(CelerisError, match="no such token file"):
        validate_model_dir(tiny_model_dir, tokens_file=val_bin.with_name("missing.bin"))


def test_eval_says_when_some_held_out_files_are_missing(tiny_model_dir, small_corpus, tmp_path):
    from typer.testing import CliRunner

    from celeris_complete.cli import app

    manifest = json.loads((tiny_model_dir / "corpus_manifest.json").read_text())
    held = sorted({Path(r["path"]).name for r in manifest["files"] if r["split"] == "validation"})
    assert len(held) >= 2  # one of them can go
    some = tmp_path / "some"
    shutil.copytree(small_corpus, some)
    (some / held[0]).unlink()
    runner = CliRunner()
    args = ["eval", "--model", str(tiny_model_dir), "--batches", "1", "--corpus"]
    partial = runner.invoke(app, [*args, str(some)])
    assert partial.exit_code == 0, partial.output
    assert "held-out files were found" in partial.stderr
    whole = runner.invoke(app, [*args, str(small_corpus)])
    assert whole.exit_code == 0 and "warning" not in whole.stderr


def test_other_languages_join_the_corpus_and_a_benchmarks_file_never_does(small_corpus, tmp_path):
    """``train --languages``: the allowlisted packages' files (their suffixes) join Python's; a file whose
    hash is a benchmark's (``never``) is dropped even when a package ships a copy of it."""
    import hashlib

    go = tmp_path / "golang-demo"
    go.mkdir()
    body = "".join(f"func f{i}(a int) int {{\n\treturn a + {i}\n}}\n\n" for i in range(60))
    (go / "demo.go").write_text("package demo\n\n" + body)
    benched = "package bench\n\nfunc Humanize(n int) string {\n\treturn \"\"\n}\n"
    (go / "copied.go").write_text(benched)
    (go / "notes.rs").write_text("fn main() {}\n")  # not a language asked for
    never = frozenset({hashlib.sha256(benched.encode()).hexdigest()})
    out = train(TrainArgs(output=tmp_path / "m", roots=[small_corpus, go], steps=1, suffixes=(".py", ".go"),
                          never=never, **TINY))  # fmt: skip
    paths = {row["path"] for row in json.loads((out / "corpus_manifest.json").read_text())["files"]}
    assert "golang-demo/demo.go" in paths and any(p.endswith(".py") for p in paths)
    assert "golang-demo/copied.go" not in paths and "golang-demo/notes.rs" not in paths
    assert "never" not in json.loads((out / "config.json").read_text())["training"]["args"]
