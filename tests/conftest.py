from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from celeris_complete.tokenizer import CodeTokenizer

REPO = Path(__file__).resolve().parent.parent
STDLIB = Path(sysconfig.get_paths()["stdlib"])
# A tiny model trained by the real pipeline in seconds: for tests of mechanics, not of quality.
TINY = dict(
    batch_size=2,
    context_len=64,
    d_model=32,
    n_layers=2,
    n_heads=2,
    vocab_size=600,
    eval_every=1000,
    max_suffix=16,
    warmup_steps=2,
    validation_every=3,
)
SMALL_CORPUS_FILES = ["textwrap.py", "shlex.py", "fnmatch.py", "glob.py", "bisect.py", "heapq.py"]


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory) -> Path:
    """A directory of a few real standard-library modules (plus copies under other names)."""
    root = tmp_path_factory.mktemp("corpus")
    for name in SMALL_CORPUS_FILES:
        (root / name).write_text((STDLIB / name).read_text(encoding="utf-8"), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def small_tok(small_corpus) -> CodeTokenizer:
    texts = [p.read_text(encoding="utf-8") for p in sorted(small_corpus.glob("*.py"))]
    return CodeTokenizer.train(texts, vocab_size=700)


@pytest.fixture(scope="session")
def tiny_model_dir(small_corpus, tmp_path_factory) -> Path:
    """A model directory written by the real training pipeline (a few steps of a tiny model)."""
    from celeris_complete.train import TrainArgs, train

    out = tmp_path_factory.mktemp("model")
    train(TrainArgs(output=out, roots=[small_corpus], steps=4, **TINY))
    return out


@pytest.fixture(scope="session")
def shipped_model_dir() -> Path:
    path = REPO / "models" / "default"
    if not (path / "model.safetensors").exists():
        pytest.fail("the shipped model is missing from models/default")
    return path
