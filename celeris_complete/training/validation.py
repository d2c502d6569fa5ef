"""Validation figures of a model on held-out code: masked-slot accuracy and infill exact match."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from celeris_complete.errors import CelerisError
from celeris_complete.model.diffusion import DecodeSettings, SpecialIds, diffuse, span_tokens
from celeris_complete.model.directory import MANIFEST, load_model_dir
from celeris_complete.model.network import InfillModel
from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.training import corpus as corpus_mod
from celeris_complete.training.data import SpanSampler


def make_masks(rng: torch.Generator, batch: int, canvas: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Diffusion times t in (0, 1] and the slots masked with probability t (at least one per sample)."""
    t = torch.rand(batch, generator=rng).clamp(min=0.02)
    masked = torch.rand(batch, canvas, generator=rng) < t[:, None]
    forced = torch.randint(0, canvas, (batch,), generator=rng)
    masked[torch.arange(batch), forced] = True
    return t.to(device), masked.to(device)


@torch.no_grad()
def evaluate(
    model: InfillModel,
    sampler: SpanSampler,
    tok: CodeTokenizer,
    device: str,
    amp,
    batches: int = 4,
    decode: bool = True,
    chunk: int = 32,
) -> dict:
    """Figures on a fixed set of held-out samples (the same samples for the same data and seed).

    - masked_acc: argmax accuracy on masked canvas slots (one random diffusion time per sample);
    - content_acc: the same, on slots that are not end-of-span;
    - exact_match: the whole span decoded from an all-mask canvas (32 slots, 8 steps) equals the truth;
    - empty_rate: how often that decoded span is empty when the truth is not.
    ``decode`` False leaves out the last two (most of the cost), for a quick comparison of models.
    ``chunk``: samples per forward pass (fewer to keep within a memory budget; the same samples).
    """
    was_training = model.training
    model.eval()
    rng = np.random.default_rng(0)
    g = torch.Generator().manual_seed(0)
    ids = SpecialIds(tok.mask_id, tok.eos_id, (tok.mask_id, tok.suf_id, tok.pre_id, tok.file_id))
    masked_n = correct = content_n = content_correct = 0
    exact = n_exact = empty = nonempty = 0
    autocast = dict(device_type=device, dtype=amp, enabled=amp is not None)
    for _ in range(batches):
        b = sampler.sample(rng, 32, 32)
        ctx = torch.from_numpy(b.context).to(device)
        can = torch.from_numpy(b.canvas).to(device)
        _, masked = make_masks(g, ctx.shape[0], can.shape[1], device)
        x = torch.where(masked, tok.mask_id, can)
        parts = [slice(lo, lo + chunk) for lo in range(0, ctx.shape[0], max(1, chunk))]
        with torch.autocast(**autocast):
            pred = torch.cat([model(ctx[p], x[p])[1].argmax(-1) for p in parts])
        content = masked & (can != tok.eos_id)
        masked_n += int(masked.sum())
        correct += int(((pred == can) & masked).sum())
        content_n += int(content.sum())
        content_correct += int(((pred == can) & content).sum())
        if not decode:
            continue
        settings = DecodeSettings(steps=8, threshold=0.9)
        with torch.autocast(**autocast):
            out = torch.cat(
                [diffuse(model, model.encode_context(ctx[p])[1], can.shape[1], ids, settings)[0] for p in parts]
            )
        for row_out, row_true, n in zip(out, can, b.span_len.tolist()):
            if n >= can.shape[1]:
                continue  # truncated spans have no single right answer inside the canvas
            got = span_tokens(row_out, tok.eos_id)
            exact += got == row_true[:n].tolist()
            n_exact += 1
            if n:
                nonempty += 1
                empty += not got
    model.train(was_training)
    figures = {
        "masked_acc": round(correct / max(1, masked_n), 4),
        "content_acc": round(content_correct / max(1, content_n), 4),
        "samples": 32 * batches,
    }
    if decode:
        figures |= {
            "exact_match": round(exact / max(1, n_exact), 4),
            "empty_rate": round(empty / max(1, nonempty), 4),
            "samples": n_exact,
        }
    return figures


def held_out_tokens(model_dir: Path, tok: CodeTokenizer, roots: list[Path] | None = None) -> tuple[np.ndarray, dict]:
    """The model's validation files, found again by content hash, as one token stream."""
    manifest_path = model_dir / MANIFEST
    if not manifest_path.is_file():
        raise CelerisError(f"{manifest_path}: missing (it lists the held-out files)")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    wanted = {r["sha256"] for r in manifest["files"] if r["split"] == "validation"}
    if not roots:  # where the training run found its sources, when they are still there
        recorded = [Path(s["root"]) for s in manifest.get("sources") or []]
        roots = [r for r in recorded if r.is_dir()] or corpus_mod.default_roots()
    found = [f for f in corpus_mod.gather(roots) if f.sha256 in wanted]
    if not found:
        raise CelerisError(f"none of the {len(wanted)} held-out files of {manifest_path} is under the corpus roots")
    chunks = [np.array([tok.file_id], dtype=np.uint16)]
    for ids in tok.encode_batch([f.text for f in found]):
        chunks += [np.asarray(ids, dtype=np.uint16), np.array([tok.file_id], dtype=np.uint16)]
    return np.concatenate(chunks), {"files_found": len(found), "files_listed": len(wanted)}


def validate_model_dir(
    model_dir: Path,
    roots: list[Path] | None = None,
    batches: int = 16,
    precision: str = "auto",
    context_len: int | None = None,
    tokens_file: Path | None = None,
    decode: bool = True,
    chunk: int = 32,
) -> dict:
    """``tokens_file``: held-out tokens of another run (its .work/val.bin, made with this model's
    tokenizer) instead of this model's own held-out files, to compare models on the same data."""
    from celeris_complete.system.hardware import pick_autocast
    from celeris_complete.training.data import load_tokens

    loaded = load_model_dir(model_dir)
    if tokens_file is not None:
        if not Path(tokens_file).is_file():
            raise CelerisError(f"{tokens_file}: no such token file")
        tokens, found = load_tokens(Path(tokens_file)), {"tokens_file": str(tokens_file)}
    else:
        tokens, found = held_out_tokens(Path(model_dir), loaded.tokenizer, roots)
    max_suffix = int(loaded.meta.get("training", {}).get("args", {}).get("max_suffix", 128))
    if context_len is None:
        context_len = int(loaded.meta.get("context_len", 384))
    if not max_suffix + 2 < context_len <= loaded.config.max_positions - 64:
        raise CelerisError(
            f"--context-len {context_len}: this model takes {max_suffix + 3} to {loaded.config.max_positions - 64}"
        )
    sampler = SpanSampler(tokens, loaded.tokenizer, context_len, max_suffix)
    amp = pick_autocast(precision, "cpu")
    figures = evaluate(loaded.model, sampler, loaded.tokenizer, "cpu", amp, batches, decode, chunk)
    return {**figures, **found, "tokens": int(tokens.size), "context_len": context_len}
