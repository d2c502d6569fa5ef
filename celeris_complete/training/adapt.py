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

from celeris_complete.config import Settings
from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import default_model_dir, load_model_dir
from celeris_complete.system.workspace_files import WorkspaceFiles
from celeris_complete.training.corpus import default_roots as corpus_default_roots
from celeris_complete.training.packages import cache_dir as corpus_cache
from celeris_complete.training.train import TrainArgs, train

ADAPT_SUFFIXES = (".py",)  # what the model reads; other sources stay for snippets only
CHECK_FILE = "check.json"
CHECK_BATCHES = 16  # 512 held-out spans, the same ones for both models
# The batch a step averages over, in context tokens: a CPU's, never the batch of the GPU run that made
# the base model (128 x 1,024 tokens took 23.7 GB and the out-of-memory killer on a 24 GB machine).
# 16 samples of 512 tokens, about the 16 x 384 (+ span) of the adaptations bench adapt first measured.
BATCH_TOKENS = 8192
MEMORY_MB = 2048.0  # beside an editor, unless the setting adapt_memory_mb says otherwise
# Peak learning rate of an adaptation (warm-up, then cosine decay over its minutes or steps). The GPU
# run's 5e-4 on a CPU batch 16x smaller overfit a small repository (bench adapt, toolz: completions
# worse, -0.0016 edit similarity with drafts, -0.049 without); 1e-4 for 180 steps: +0.005 / +0.004 with
# drafts on toolz / sqlparse, and a higher held-out accuracy (0.3675 against 0.3517 on toolz).
LR = 1e-4
# The share of an adaptation's training text replayed from the standard library's files the base
# model trained on (every Python has them): what the model knew stays while it learns the repository.
REPLAY = 0.0


def adapt_dir(workspace: Path) -> Path:
    key = hashlib.sha256(str(workspace.resolve()).encode()).hexdigest()[:16]
    return corpus_cache().parent / "adapt" / f"{workspace.resolve().name}-{key}"


def snapshot(workspace: Path, settings: Settings, dest: Path) -> list[str]:
    """Copy the workspace's wanted Python files into ``dest``; returns their paths in the workspace."""
    walker = WorkspaceFiles(workspace, (*settings.secret_globs, *settings.ignore_globs))  # the indexer's rules
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
    lr: float = LR,
    check_batches: int = CHECK_BATCHES,
    steps: int | None = None,
    replay: float = REPLAY,
    **train_options,
) -> Path:
    """Train a copy of the configured model on ``workspace``, then ``check`` it against the base
    model (``check_batches`` 0: no check); returns the adapted model's directory.  The process keeps
    to ``settings.adapt_memory_mb`` (micro-batches sized for this machine); ``replay``: the share of the
    training text from the standard library's training files.  ``steps``: train that many
    steps instead of for ``minutes`` (the same training whatever else the machine is doing)."""
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
    trained = loaded.meta.get("training", {})
    context_len = adapt_context_len(settings, int(loaded.meta.get("context_len", 384)))
    options = {
        "context_len": context_len,
        "max_suffix": int(trained.get("args", {}).get("max_suffix") or min(128, context_len // 3)),
        "batch_size": max(1, round(BATCH_TOKENS / context_len)),
        "memory_mb": float(settings.adapt_memory_mb),
        "warmup_steps": 20,  # a short run: 200 warm-up steps would never end in 10 minutes here
        "eval_every": 50,
        # Accuracy only: decoding the held-out spans took 7 of the 10 minutes of a 20-second run on this
        # machine, and the check after the run is what decides.
        "eval_decode": False,
        "replay_roots": corpus_default_roots() if replay > 0 else [],
        "replay_share": replay,
        **train_options,
    }
    (out / CHECK_FILE).unlink(missing_ok=True)  # the verdict on an earlier stretch no longer holds
    budget = {"steps": steps} if steps else {"minutes": minutes}
    args = TrainArgs(output=out, roots=[src], init_from=base, lr=lr, **budget, **options)
    train(args)
    if check_batches:
        check(out, base, check_batches, memory_mb=options["memory_mb"])
    return out


def adapt_context_len(settings: Settings, model_context: int) -> int:
    """Contexts as long as the engine's (prefix, suffix and snippet budgets, a few markers; in steps of
    128 tokens, at most the model's): 512 tokens with the default settings, where the shipped model was
    trained on up to 1,024.  A shorter sample costs less, so a minute of adaptation sees more of them."""
    engine = settings.prefix_tokens + settings.suffix_tokens + settings.snippet_tokens + 16
    return min(model_context, max(256, -(-engine // 128) * 128))


def check(adapted: Path, base: Path, batches: int = CHECK_BATCHES, memory_mb: float = MEMORY_MB) -> dict:
    """Both models on the adapted run's held-out workspace files (the same spans for each): the
    adapted model passes when its masked-token accuracy there is not below the base model's.
    Written to ``adapted/check.json``."""
    from celeris_complete.training.validation import validate_model_dir

    held_out = adapted / ".work" / "val.bin"
    context_len = json.loads((adapted / "config.json").read_text(encoding="utf-8"))["context_len"]  # both at it
    # Samples per pass: a pass without gradients took 40 MB a sample of 1,024 tokens (the shipped model),
    # so a sixth of the budget at ~43 MB each: 8 within 2 GB.
    chunk = max(1, min(32, int(memory_mb / 256)))
    figures = {
        m: validate_model_dir(
            path, batches=batches, tokens_file=held_out, decode=False, chunk=chunk, context_len=context_len
        )
        for m, path in (("base", base), ("adapted", adapted))
    }
    passed = figures["adapted"]["content_acc"] >= figures["base"]["content_acc"]
    result = {"passed": passed, "metric": "content_acc", "base_model": str(base), **figures}
    tmp = adapted / (CHECK_FILE + ".tmp")
    tmp.write_text(json.dumps(result, indent=1), encoding="utf-8")
    os.replace(tmp, adapted / CHECK_FILE)
    return result
