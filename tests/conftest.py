from __future__ import annotations

import importlib
import os
import shutil
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

from celeris_complete.backends import trace_store
from celeris_complete.model.tokenizer import CodeTokenizer

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
# The files that take longest (20-80 s each on the 2-core CI machine) run first: pytest-xdist's
# --dist loadfile hands files to the two workers in collection order, and alphabetically the training
# files come last, where one worker ran them alone while the other had finished.
SLOWEST_FIRST = (
    "test_train.py",
    "test_train_ddp.py",
    "test_lsp_snippets.py",
    "test_bench_cli.py",
    "test_neovim.py",
    "test_lsp_adaptation.py",
    "test_train_memory.py",
    "test_engine.py",
    "test_serve_ray.py",
    "test_serve.py",
    "test_lsp.py",
    "test_bench_adapt.py",
    "test_bench_studies.py",
    "test_vscode.py",
)


TRACED = "CELERIS_TRACE_CACHE"


def pytest_configure(config) -> None:
    """One folder of traced graphs for the whole run: its workers, the engines they build and the servers
    and editors they start (each model is traced once, as on a user's machine; not in the user's own
    folder). Made before pytest-xdist starts its workers, which inherit it."""
    if TRACED not in os.environ:
        os.environ[TRACED] = config._celeris_traced = tempfile.mkdtemp(prefix="celeris-traced-")
    run_folder = Path(os.environ[TRACED])
    trace_store.default_root = lambda: run_folder  # engines built here with settings of their own


def pytest_unconfigure(config) -> None:
    if folder := getattr(config, "_celeris_traced", None):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(config, items) -> None:
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOWEST_FIRST)))  # stable: a file's own order kept


# Set to 1 to skip, rather than fail, the tests whose dependency (one the `test` extra lists) is missing.
ALLOW_MISSING = "CELERIS_ALLOW_MISSING_TEST_DEPS"


def require(module: str) -> ModuleType:
    """Import ``module``, which needs test dependencies that pyproject.toml's `test` extra lists.

    Where one is missing, the import is an error that names it (CI must fail, not skip what it
    cannot run); with CELERIS_ALLOW_MISSING_TEST_DEPS=1 the tests that need it are skipped instead,
    with the same words as the reason.  Called at a module's top it stands for the whole module."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        needed = "" if missing == module else f", needed by {module}"
        why = f"{missing} is not installed (a test dependency{needed}): pip install -e '.[test]'"
        if os.environ.get(ALLOW_MISSING) == "1":
            pytest.skip(f"{why} [skipped: {ALLOW_MISSING}=1]", allow_module_level=True)
        raise ModuleNotFoundError(f"{why}; or set {ALLOW_MISSING}=1 to skip these tests", name=missing) from exc


def resident_mb() -> float:
    """This process's resident memory (Linux: /proc/self/statm), in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def resident_drop_after_free(release, mb: int = 128) -> tuple[float, float]:
    """(MB freed, MB by which resident memory then fell when ``release()`` ran).

    Blocks of 64 KB (below glibc's mmap threshold: from the heap, not mappings of their own that free()
    unmaps), every other one freed: the ones kept between them stop free() from shrinking the heap, so
    what it freed stays resident until the allocator is told to give the pages back."""
    blocks = [bytes(65536 - 64) for _ in range(mb * 32)]  # bytes(): zeroed, so each page is touched
    kept = blocks[1::2]
    before = resident_mb()
    del blocks  # the other half
    freed = resident_mb()
    release()
    dropped = freed - resident_mb()
    del kept
    assert before - freed < mb / 4, f"free() gave {before - freed:.0f} MB back itself: the check would prove nothing"
    return float(mb), dropped


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
    from celeris_complete.training.train import TrainArgs, train

    out = tmp_path_factory.mktemp("model")
    train(TrainArgs(output=out, roots=[small_corpus], steps=4, **TINY))
    return out


@pytest.fixture(scope="session")
def shipped_model_dir() -> Path:
    path = REPO / "models" / "default"
    if not (path / "model.safetensors").exists():
        pytest.fail("the shipped model is missing from models/default")
    return path
