"""Adapting a model to one repository: a copy of it trained on for a while on the repository's files.

The workspace's source files are chosen as the language server's indexer chooses them (``.gitignore``
at every level, ignore and secret globs: a secret file is judged by its path and never opened),
copied into a snapshot under the user's cache (never inside the workspace), and the base model is
trained on from there at low priority for a bounded time with a schedule made for short runs. The
result is a model directory beside the snapshot, with the manifest of the files used; run again, the
same command goes on from its checkpoint (``fresh`` starts over from a new snapshot). ``check`` then
compares the adapted and the base model on the workspace files the run held out, and records whether
the adapted model may replace the base one (``check.json``, read by the language server).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from .config import Settings
from .corpus_packages import cache_dir as corpus_cache
from .errors import CelerisError
from .model_dir import default_model_dir, load_model_dir
from .train import TrainArgs, train

ADAPT_SUFFIXES = (".py",)  # what the model reads; other sources stay for snippets only
CHECK_FILE = "check.json"
CHECK_BATCHES = 16  # 512 held-out spans, the same ones for both models


def adapt_dir(workspace: Path) -> Path:
    key = hashlib.sha256(str(workspace.resolve()).encode()).hexdigest()[:16]
    return corpus_cache().parent / "adapt" / f"{workspace.resolve().name}-{key}"


def snapshot(workspace: Path, settings: Settings, dest: Path) -> list[str]:
    """Copy the workspace's wanted Python files into ``dest``; returns their paths in the workspace."""
    from celeris_lsp.workspace_index import WorkspaceIndexer  # the indexer's rules, without its threads

    from celeris_complete.snippets import SnippetIndex

    walker = WorkspaceIndexer(workspace, SnippetIndex(), (*settings.secret_globs, *settings.ignore_globs))
    copied = []
    for path in walker.walk():
        if path.suffix not in ADAPT_SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(walker.root)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        copied.append(rel.as_posix())
    return copied


def adapt(
    workspace: Path,
    settings: Settings,
    minutes: float,
    fresh: bool = False,
    lr: float = 5e-4,
    check_batches: int = CHECK_BATCHES,
    **train_options,
) -> Path:
    """Train a copy of the configured model on ``workspace``, then ``check`` it against the base
    model (``check_batches`` 0: no check); returns the adapted model's directory."""
    workspace = Path(workspace).expanduser()
    if not workspace.is_dir():
        raise CelerisError(f"{workspace}: not a folder")
    base = Path(settings.model).expanduser() if settings.model else default_model_dir()
    loaded = load_model_dir(base)  # a clear error for a missing or broken model, before any work
    home = adapt_dir(workspace)
    out, src = home / "model", home / "src"
    if fresh:
        shutil.rmtree(home, ignore_errors=True)
    if not (out / ".work" / "checkpoint.safetensors").exists():
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        files = snapshot(workspace, settings, src)
        if len(files) < 2:
            raise CelerisError(f"{workspace}: {len(files)} Python file(s) to learn from; adapting needs at least 2")
    try:
        os.nice(10)  # completions come first
    except OSError:
        pass
    trained = loaded.meta.get("training", {})
    context_len = int(loaded.meta.get("context_len", 384))
    options = {
        "context_len": context_len,
        "max_suffix": int(trained.get("args", {}).get("max_suffix") or min(128, context_len // 3)),
        "batch_size": int(trained.get("batch_size") or 16),
        "warmup_steps": 20,  # a short run: 200 warm-up steps would never end in 10 minutes here
        "eval_every": 50,
        # Accuracy only: decoding the held-out spans took 7 of the 10 minutes of a 20-second run on this
        # machine, and the check after the run is what decides.
        "eval_decode": False,
        **train_options,
    }
    (out / CHECK_FILE).unlink(missing_ok=True)  # the verdict on an earlier stretch no longer holds
    args = TrainArgs(output=out, roots=[src], init_from=base, minutes=minutes, lr=lr, **options)
    train(args)
    if check_batches:
        check(out, base, check_batches)
    return out


def check(adapted: Path, base: Path, batches: int = CHECK_BATCHES) -> dict:
    """Both models on the adapted run's held-out workspace files (the same spans for each): the
    adapted model passes when its masked-token accuracy there is not below the base model's.
    Written to ``adapted/check.json``."""
    from .validation import validate_model_dir

    held_out = adapted / ".work" / "val.bin"
    figures = {
        "base": validate_model_dir(base, batches=batches, tokens_file=held_out, decode=False),
        "adapted": validate_model_dir(adapted, batches=batches, tokens_file=held_out, decode=False),
    }
    passed = figures["adapted"]["content_acc"] >= figures["base"]["content_acc"]
    result = {"passed": passed, "metric": "content_acc", "base_model": str(base), **figures}
    tmp = adapted / (CHECK_FILE + ".tmp")
    tmp.write_text(json.dumps(result, indent=1), encoding="utf-8")
    os.replace(tmp, adapted / CHECK_FILE)
    return result
