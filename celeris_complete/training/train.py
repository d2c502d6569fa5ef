"""The training pipeline: corpus -> tokenizer -> memory-mapped tokens -> masked-diffusion training.

Objective per sample (MDLM / LLaDA): draw t in (0, 1], mask each canvas slot
with probability t, cross-entropy on the masked slots weighted by 1/t; the
context stays clean.  End-of-span slots after the first one (which marks where
the span stops) are down-weighted.  In the same forward pass every context
token is also a next-token target (the context attends causally), which gives
far more signal than the span alone.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import MANIFEST, TOKENIZER, LoadedModel, load_model_dir, save_model_dir
from celeris_complete.model.network import InfillModel, ModelConfig
from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.system.hardware import pick_autocast, pick_device
from celeris_complete.system.memory import release_freed_memory
from celeris_complete.training import corpus as corpus_mod
from celeris_complete.training import distributed
from celeris_complete.training.checkpoint import checkpoint_meta, load_checkpoint, save_checkpoint
from celeris_complete.training.data import Batch, SpanSampler, load_tokens, pretokenize
from celeris_complete.training.losses import _optimizer, losses
from celeris_complete.training.memory_budget import MemoryPlan, budget_mb, estimate_sample_mb, peak_resident_mb
from celeris_complete.training.memory_budget import plan as plan_memory
from celeris_complete.training.validation import evaluate, make_masks

PRESETS: dict[str, dict] = {
    # Sized for keystroke latency on a laptop CPU and for a couple of hours on 2 cores.
    "cpu": dict(d_model=256, n_layers=6, n_heads=4, batch_size=16, context_len=384, lr=2e-3),
    # Same latency class on a GPU box, more data per step.
    "gpu": dict(d_model=384, n_layers=8, n_heads=6, batch_size=128, context_len=512, lr=1.5e-3),
}
CANVAS_CHOICES = (16, 24, 32, 48, 64)


@dataclass
class TrainArgs:
    output: Path
    roots: list[Path] = field(default_factory=corpus_mod.default_roots)
    sources: list[dict] = field(default_factory=list)  # package, version, licence per root (manifest)
    excludes: tuple[str, ...] = corpus_mod.DEFAULT_EXCLUDES
    suffixes: tuple[str, ...] = (".py",)  # the sources' suffixes (other languages: training/sources.py)
    never: frozenset[str] = frozenset()  # sha256 of files never to train on (a benchmark's; dropped if found)
    preset: str = "cpu"
    minutes: float | None = None
    steps: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    # Context lengths to train on; each step draws one.  The batch given is for the
    # first (shortest) and shrinks for longer ones to keep the tokens per step.
    context_len: int | list[int] | None = None
    init_from: Path | None = None  # start from this model directory's weights and tokenizer
    max_suffix: int = 128
    # Replay: files the starting model was trained on (its training split under these roots), added to
    # the training side only, as this share of the training text: an adaptation keeps what it knew.
    replay_roots: list[Path] = field(default_factory=list)
    replay_share: float = 0.0
    vocab_size: int = 8192
    validation_every: int = corpus_mod.VALIDATION_EVERY
    seed: int = 1234
    device: str = "auto"
    precision: str = "auto"
    # CPU threads; 0: the cores, shared among the processes. 1 for a run in the background of other work
    # (two threads stall whenever one's core is taken: see the README's training section).
    threads: int = 0
    warmup_steps: int = 200
    rest_of_line: float = 0.0  # share of spans from inside a line to its end (data.SpanSampler)
    eos_weight: float = 0.1
    eval_every: int = 250
    eval_decode: bool = True  # validation also decodes (exact match): minutes on a CPU; off, accuracy only
    checkpoint_minutes: float = 5.0
    # One stretch of a longer run: stop (checkpoint written) after this much; the same command resumes.
    stretch_minutes: float | None = None
    stretch_steps: int | None = None
    log_every: int = 10
    # On the CPU: the process's memory budget in MiB (None: half of what the machine has available). The
    # batch is split into micro-batches that fit it, their gradients accumulated (train_memory.py).
    memory_mb: float | None = None
    d_model: int | None = None
    n_layers: int | None = None
    n_heads: int | None = None


class Progress:
    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def show(self, text: str, final: bool = False) -> None:
        if self.tty and not final:
            sys.stderr.write("\r" + text[:160].ljust(160))
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()


def prepare_data(
    args: TrainArgs, work: Path, progress: Progress, tok: CodeTokenizer | None = None
) -> tuple[CodeTokenizer, Path, Path]:
    """Corpus, tokenizer (trained here unless given) and token files; reused when they already exist (resume)."""
    tok_path = work / TOKENIZER
    train_bin, val_bin = work / "train.bin", work / "val.bin"
    if tok_path.exists() and train_bin.exists() and val_bin.exists():
        return CodeTokenizer.load(tok_path), train_bin, val_bin
    files = [f for f in corpus_mod.gather(args.roots, args.excludes, args.suffixes) if f.sha256 not in args.never]
    lengths = args.context_len if isinstance(args.context_len, list) else [args.context_len or 384]
    held = corpus_mod.validation_split(files, args.validation_every, 4 * (max(lengths) + args.max_suffix + 600))
    train_files = [f for f in files if f.sha256 not in held]
    val_files = [f for f in files if f.sha256 in held]
    if not train_files or not val_files:
        raise CelerisError(f"the corpus has {len(files)} files: too few to hold out a validation split")
    replay = replay_files(args, {f.sha256 for f in files}, sum(len(f.text) for f in train_files))
    train_files += replay
    corpus_mod.write_manifest(files + replay, work / MANIFEST, args.validation_every, args.sources, held)
    more = f" (+{len(replay)} replayed)" if replay else ""
    progress.show(f"corpus: {len(train_files)} train files{more}, {len(val_files)} validation files", final=True)
    if tok is None:
        tok = CodeTokenizer.train((f.text for f in train_files), args.vocab_size)
    n_train = pretokenize(train_files, tok, train_bin)
    n_val = pretokenize(val_files, tok, val_bin)
    tok.save(tok_path)  # last: its presence marks the data as complete
    progress.show(f"tokens: {n_train} train, {n_val} validation", final=True)
    return tok, train_bin, val_bin


def replay_files(args: TrainArgs, taken: set[str], train_chars: int) -> list[corpus_mod.CorpusFile]:
    """Files under ``args.replay_roots`` on the training side of the corpus split (the starting model
    saw them), in a seeded order, until they hold ``replay_share`` of the training text."""
    share = args.replay_share
    if not args.replay_roots or share <= 0:
        return []
    if share >= 1:
        raise CelerisError(f"replay_share is a share of the training text, below 1, not {share}")
    pool = [
        f
        for f in corpus_mod.gather(args.replay_roots, args.excludes)
        if f.sha256 not in taken and not f.in_validation(corpus_mod.VALIDATION_EVERY)
    ]
    random.Random(args.seed).shuffle(pool)
    want, chosen, chars = train_chars * share / (1 - share), [], 0
    for f in pool:
        if chars >= want:
            break
        chosen.append(f)
        chars += len(f.text)
    return chosen


def accumulate(
    batch: Batch,
    t: torch.Tensor,
    masked: torch.Tensor,
    micro: int,
    loss_of: Callable[[Batch, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
) -> tuple[float, float, float]:
    """Backward passes over ``batch`` in micro-batches of ``micro`` samples, each loss weighted by its
    share of the batch: the gradients add up to the whole batch's.  Returns its (total, context, span)
    losses."""
    n = len(batch.context)
    sums = [0.0, 0.0, 0.0]
    for lo in range(0, n, micro):
        part = slice(lo, min(n, lo + micro))
        share = (part.stop - part.start) / n
        piece = Batch(batch.context[part], batch.canvas[part], batch.span_len[part])
        loss, loss_ctx, loss_span = loss_of(piece, t[part], masked[part])
        (loss * share).backward()
        for i, value in enumerate((loss, loss_ctx, loss_span)):
            sums[i] += value.item() * share
    return sums[0], sums[1], sums[2]


def _plan_memory(
    args: TrainArgs,
    model: InfillModel,
    opt: torch.optim.Optimizer,
    sampler: SpanSampler,
    batch: int,
    tok: CodeTokenizer,
    amp: torch.dtype | None,
    procs: distributed.Processes,
) -> MemoryPlan | None:
    """The micro-batch of the longest context that keeps a CPU run inside its memory budget: measured
    with passes over held-aside samples (the run's own random streams untouched), rank 0's plan on
    every process."""
    budget = budget_mb(args.memory_mb)
    if budget is None:
        return None
    canvas = max(CANVAS_CHOICES)
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)

    def step(n: int) -> None:
        b = sampler.sample(rng, n, canvas)
        t, masked = make_masks(gen, n, canvas, "cpu")
        loss, _, _ = losses(model, b, t, masked, tok, "cpu", amp, args.eos_weight)
        loss.backward()
        opt.zero_grad(set_to_none=True)

    cfg = model.cfg
    params_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / (1024 * 1024)
    # AdamW's two moments, allocated at the first step, and as much again for its temporaries.
    optimizer_mb = 2 * params_mb if opt.state else 4 * params_mb
    estimate = estimate_sample_mb(sampler.context_len + canvas, cfg.d_model, cfg.n_layers, cfg.vocab_size)
    memory = plan_memory(budget, batch, optimizer_mb, step, estimate)
    if procs.world > 1:  # every process must run as many backward passes (each one synchronises)
        figures = (memory.budget_mb, memory.fixed_mb, memory.sample_mb, memory.micro_batch)
        budget, fixed, sample, micro = (procs.agree(x) for x in figures)
        memory = MemoryPlan(budget, fixed, sample, int(micro), memory.measured)
    return memory


def _lineage(init: LoadedModel | None) -> dict | None:
    """What the starting model was, for the model card: its own training and lineage."""
    if init is None:
        return None
    t = init.meta.get("training", {})
    keep = ("preset", "steps", "tokens_seen", "wall_seconds", "device", "context_len", "lr", "init_from")
    return {"path": str(init.path), **{k: t[k] for k in keep if k in t}}


def train(args: TrainArgs) -> Path | None:
    """Train; returns the model directory, or None when a stretch ended before the run's budget."""
    if args.threads < 0:
        raise CelerisError(f"threads must be 0 (the cores) or more, not {args.threads}")
    progress = Progress()
    preset = dict(PRESETS[args.preset])
    for key in ("batch_size", "lr", "context_len", "d_model", "n_layers", "n_heads"):
        if getattr(args, key) is not None:
            preset[key] = getattr(args, key)
    device = pick_device(args.device)
    amp = pick_autocast(args.precision, device)
    torch.manual_seed(args.seed)
    procs = distributed.start(device)
    if not procs.main:
        progress.show = lambda text, final=False: None  # one process reports
    threads_before = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // procs.local_world))
    try:
        out = _train(args, preset, device, amp, procs, progress)
        procs.close()
        return out
    finally:
        torch.set_num_threads(threads_before)  # the caller's (a test session, the adaptation's parent) again


def _train(
    args: TrainArgs, preset: dict, device: str, amp: torch.dtype | None, procs: distributed.Processes, progress
) -> Path | None:
    out = Path(args.output)
    work = out / ".work"
    work.mkdir(parents=True, exist_ok=True)
    given = [args.context_len] if isinstance(args.context_len, int) else args.context_len
    lengths = sorted(set(given or [preset["context_len"]]))
    if lengths[0] <= args.max_suffix + 2:
        raise CelerisError(
            f"--context-len {lengths[0]}: too short, a context holds up to {args.max_suffix} suffix tokens"
        )
    L = lengths[-1]
    if args.init_from and any(getattr(args, k) is not None for k in ("d_model", "n_layers", "n_heads")):
        raise CelerisError(
            "--init-from keeps the starting model's architecture: leave out --d-model, --n-layers, --n-heads"
        )
    init = load_model_dir(args.init_from) if args.init_from else None
    if procs.main:
        tok, train_bin, val_bin = prepare_data(args, work, progress, init.tokenizer if init else None)
    procs.barrier()  # the others find the data rank 0 prepared
    if not procs.main:
        tok, train_bin, val_bin = prepare_data(args, work, progress, init.tokenizer if init else None)
    positions = L + max(CANVAS_CHOICES) + 64
    if init is not None:
        if tok.token_bytes != init.tokenizer.token_bytes:
            raise CelerisError(f"{work}: holds data made with another tokenizer than {args.init_from}'s; remove it")
        grown = max(init.config.max_positions, positions)
        cfg = ModelConfig.from_dict({**init.config.to_dict(), "max_positions": grown})
    else:
        cfg = ModelConfig(
            vocab_size=math.ceil(tok.vocab_size / 64) * 64,
            d_model=preset["d_model"],
            n_layers=preset["n_layers"],
            n_heads=preset["n_heads"],
            max_positions=positions,
            max_canvas=max(CANVAS_CHOICES),
        )
    model = InfillModel(cfg)
    if init is not None:  # rotary tables are not weights: a longer context just extends them
        model.load_state_dict(init.model.state_dict())
    model = model.to(device)
    opt = _optimizer(model, preset["lr"])
    # Under torchrun the forward pass goes through DDP, which averages the gradients in backward.
    forward = torch.nn.parallel.DistributedDataParallel(model) if procs.world > 1 else model
    train_tokens = load_tokens(train_bin)
    samplers = {n: SpanSampler(train_tokens, tok, n, args.max_suffix, args.rest_of_line) for n in lengths}
    val_sampler = SpanSampler(load_tokens(val_bin), tok, L, args.max_suffix)  # the same mix for every run
    np_rng = np.random.default_rng(args.seed)
    torch_rng = torch.Generator().manual_seed(args.seed)
    ckpt = work / "checkpoint.safetensors"
    run = {
        "init_from": str(args.init_from) if args.init_from else None,
        "context_lens": lengths,
        "model": cfg.to_dict(),
    }
    if args.rest_of_line:  # absent otherwise, so checkpoints from before the option still resume
        run["rest_of_line"] = args.rest_of_line
    state = {"step": 0, "elapsed": 0.0, "tokens": 0, "history": [], "run": run}
    if ckpt.exists():
        earlier = checkpoint_meta(ckpt).get("run")
        if earlier is not None and earlier != run:
            differ = ", ".join(k for k in run if earlier.get(k) != run[k])
            raise CelerisError(
                f"{ckpt}: a run with another {differ} ({earlier}); give the same options to resume it, or remove {work}"
            )
        state.update(load_checkpoint(ckpt, model, opt, np_rng, torch_rng))
        state.pop("opt_step", None)
        progress.show(f"resumed from {ckpt} at step {state['step']}", final=True)
    budget_s = args.minutes * 60 if args.minutes else None
    if budget_s is None and args.steps is None:
        raise CelerisError("give a budget: --minutes or --steps")
    B = preset["batch_size"]
    batch_for = {n: max(1, round(B * lengths[0] / n)) for n in lengths}
    if any(b % procs.world for b in batch_for.values()):
        raise CelerisError(
            f"batches of {sorted(batch_for.values())} samples do not split over {procs.world} processes: "
            "give a --batch-size that does"
        )
    memory = None
    if device == "cpu":
        memory = _plan_memory(args, model, opt, samplers[L], batch_for[L] // procs.world, tok, amp, procs)
    local = {n: batch_for[n] // procs.world for n in lengths}
    longest = L + max(CANVAS_CHOICES)
    micro_for = dict(local)
    if memory is not None:
        micro_for = {n: memory.micro_batch_for(n + max(CANVAS_CHOICES), longest, local[n]) for n in lengths}
    eval_chunk = 32 if memory is None else memory.micro_batch_for(L + 32, longest, 32, inference=True)
    t_start = time.time() - state["elapsed"]
    last_ckpt = time.time()
    ema = None
    progress.show(
        f"model: {model.num_parameters() / 1e6:.2f}M parameters, {cfg.n_layers} layers, d={cfg.d_model}; "
        f"device {device}, autocast {amp}, batch x context tokens: "
        + ", ".join(f"{batch_for[n]} x {n}" for n in lengths)
        + (f"; starting from {args.init_from}" if init else "")
        + (f"; {procs.world} processes" if procs.world > 1 else ""),
        final=True,
    )
    if memory is not None:
        progress.show(
            memory.describe()
            + "; micro-batches of "
            + ", ".join(f"{micro_for[n]} x {n}" for n in lengths)
            + (" (gradients accumulated)" if any(micro_for[n] < local[n] for n in lengths) else ""),
            final=True,
        )
    stretch_start, stretch_step0 = time.time(), state["step"]

    def fraction_done() -> float:
        if args.steps is not None:
            return state["step"] / args.steps
        return procs.agree((time.time() - t_start) / budget_s)

    def stretch_over() -> bool:
        if args.stretch_steps is not None and state["step"] - stretch_step0 >= args.stretch_steps:
            return True
        minutes = args.stretch_minutes
        return minutes is not None and procs.agree(time.time() - stretch_start) >= minutes * 60

    def loss_of(part: Batch, t_part: torch.Tensor, masked_part: torch.Tensor):
        return losses(forward, part, t_part, masked_part, tok, device, amp, args.eos_weight)

    while (frac := fraction_done()) < 1.0:
        if stretch_over():
            if procs.main:
                save_checkpoint(ckpt, model, opt, dict(state), np_rng, torch_rng)
            procs.barrier()  # leave together: a rank that quits while rank 0 writes aborts the group
            progress.show(f"stretch over at step {state['step']}; checkpoint {ckpt}", final=True)
            return None
        step = state["step"]
        warmup = min(1.0, (step + 1) / args.warmup_steps)
        lr = preset["lr"] * warmup * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        canvas = CANVAS_CHOICES[int(np_rng.integers(0, len(CANVAS_CHOICES)))]
        n_ctx = lengths[int(np_rng.integers(0, len(lengths)))] if len(lengths) > 1 else L
        b_size = batch_for[n_ctx]
        batch = samplers[n_ctx].sample(np_rng, b_size, canvas)  # the global batch, the same on every process
        t, masked = make_masks(torch_rng, b_size, canvas, device)
        if procs.world > 1:
            mine = procs.slice(b_size)
            batch = Batch(batch.context[mine], batch.canvas[mine], batch.span_len[mine])
            t, masked = t[mine], masked[mine]
        opt.zero_grad(set_to_none=True)
        loss, loss_ctx, loss_span = accumulate(batch, t, masked, micro_for[n_ctx], loss_of)
        if not math.isfinite(loss):
            raise CelerisError(f"training diverged at step {step} (loss {loss}); lower --lr")
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["step"] = step + 1
        state["tokens"] += b_size * (n_ctx + canvas)
        state["elapsed"] = time.time() - t_start
        vals = procs.mean((loss, loss_ctx, loss_span))
        ema = vals if ema is None else tuple(0.95 * e + 0.05 * v for e, v in zip(ema, vals))
        if state["step"] % args.log_every == 0:
            tps = state["tokens"] / max(1e-9, state["elapsed"])
            f = max(1e-9, fraction_done())
            eta = state["elapsed"] * (1 - f) / f
            progress.show(
                f"step {state['step']} {f * 100:5.1f}% loss {ema[0]:.3f} (ctx {ema[1]:.3f} span {ema[2]:.3f}) "
                f"lr {lr:.2e} {tps:,.0f} tok/s ETA {eta / 60:.1f} min"
                + (f" peak {peak_resident_mb():,.0f} MB" if device == "cpu" else "")
            )
        if state["step"] % args.eval_every == 0 and procs.main:
            figures = evaluate(model, val_sampler, tok, device, amp, decode=args.eval_decode, chunk=eval_chunk)
            state["history"].append({"step": state["step"], "tokens": state["tokens"], "loss": ema[0], **figures})
            progress.show(f"eval step {state['step']}: " + json.dumps(figures), final=True)
        if procs.main and time.time() - last_ckpt > args.checkpoint_minutes * 60:
            save_checkpoint(ckpt, model, opt, dict(state), np_rng, torch_rng)
            last_ckpt = time.time()
    if not procs.main:
        procs.barrier()  # rank 0 writes the checkpoint and the model directory
        return out
    save_checkpoint(ckpt, model, opt, dict(state), np_rng, torch_rng)
    opt.zero_grad(set_to_none=True)
    release_freed_memory()  # the training passes' memory, before the evaluation's
    figures = evaluate(model, val_sampler, tok, device, amp, batches=16, decode=args.eval_decode, chunk=eval_chunk)
    progress.show("final validation: " + json.dumps(figures), final=True)
    if device == "cpu":
        progress.show(f"peak resident memory {peak_resident_mb():,.0f} MB", final=True)
    meta = {
        "training": {
            "preset": args.preset,
            "steps": state["step"],
            "tokens_seen": state["tokens"],
            "wall_seconds": round(state["elapsed"], 1),
            "device": device if device == "cpu" else torch.cuda.get_device_name(),
            "cpu": platform.processor() or platform.machine(),
            "threads": torch.get_num_threads(),
            "processes": procs.world,
            "autocast": str(amp),
            "seed": args.seed,
            "batch_size": B,
            **({"micro_batches": {str(n): micro_for[n] for n in lengths}} if memory is not None else {}),
            "context_len": L,
            "context_lens": {str(n): batch_for[n] for n in lengths},
            "lr": preset["lr"],
            "parameters": model.num_parameters(),
            "validation": figures,
            "history": state["history"],
            "args": {
                k: (str(v) if isinstance(v, Path) else v)
                for k, v in asdict(args).items()
                if k not in ("roots", "sources", "replay_roots", "never")
            },
            "replay_roots": [str(r) for r in args.replay_roots],
            "roots": [str(r) for r in args.roots],
            "init_from": _lineage(init),
        },
        "context_len": L,
    }
    if init is not None and "decode" in init.meta:
        # The starting model's decoding settings (tuned for it by `bench tune`) until it is tuned anew:
        # without them the engine's built-in defaults apply (4 steps, no end-of-span penalty), which
        # made a continued model look emptier and slower than its start in a side-by-side comparison.
        meta["decode"] = init.meta["decode"]
    save_model_dir(out, model.cpu(), tok, meta)
    (out / MANIFEST).write_bytes((work / MANIFEST).read_bytes())
    procs.barrier()
    return out
