"""A model directory on disk: config.json, tokenizer.json, model.safetensors (+ manifest, card).

Loading checks everything it can and names the file and what is wrong. It never unpickles.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from celeris_complete.errors import CelerisError
from celeris_complete.model.network import InfillModel, ModelConfig
from celeris_complete.model.tokenizer import CodeTokenizer

CONFIG = "config.json"
TOKENIZER = "tokenizer.json"
WEIGHTS = "model.safetensors"
MANIFEST = "corpus_manifest.json"
FORMAT = "celeris-infill-v1"


@dataclass
class LoadedModel:
    model: InfillModel
    tokenizer: CodeTokenizer
    config: ModelConfig
    meta: dict
    path: Path


def default_model_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "models" / "default"


def weights_digest(weights: Path) -> str:
    """The weights file's SHA-256, in hex: what caches of a model's compiled forms are keyed by."""
    h = hashlib.sha256()
    with weights.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_model_dir(path: Path, model: InfillModel, tok: CodeTokenizer, meta: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    tok.save(path / TOKENIZER)
    config = {
        "format": FORMAT,
        "model": model.cfg.to_dict(),
        "special_tokens": tok.special_ids(),
        "bpe_vocab_size": tok.bpe_vocab_size,
        **meta,
    }
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    tmp = path / (WEIGHTS + ".tmp")
    save_file(state, str(tmp), metadata={"format": FORMAT})
    tmp.replace(path / WEIGHTS)
    tmp = path / (CONFIG + ".tmp")
    tmp.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path / CONFIG)


def read_config(path: Path) -> dict:
    cfg_path = path / CONFIG
    if not path.is_dir():
        raise CelerisError(
            f"model directory not found: {path} (models load from a local directory; nothing is downloaded)"
        )
    if not cfg_path.is_file():
        raise CelerisError(f"{cfg_path}: missing (a model directory holds {CONFIG}, {TOKENIZER}, {WEIGHTS})")
    try:
        data = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CelerisError(f"{cfg_path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CelerisError(f'{cfg_path}: not a celeris-complete model config (expected "format": "{FORMAT}")')
    return data


def load_model_dir(path: Path | str, device: str = "cpu") -> LoadedModel:
    path = Path(path).expanduser()
    data = read_config(path)
    try:
        cfg = ModelConfig.from_dict(data["model"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CelerisError(f'{path / CONFIG}: bad "model" section ({exc})') from None
    tok = CodeTokenizer.load(path / TOKENIZER)
    if tok.special_ids() != data.get("special_tokens"):
        raise CelerisError(
            f"{path / TOKENIZER}: does not match {CONFIG} (special token ids {tok.special_ids()} "
            f"vs {data.get('special_tokens')}); the tokenizer and the weights come from different models"
        )
    if tok.vocab_size > cfg.vocab_size:
        raise CelerisError(f"{path / TOKENIZER}: {tok.vocab_size} tokens but the model has {cfg.vocab_size}")
    weights = path / WEIGHTS
    if not weights.is_file():
        raise CelerisError(f"{weights}: missing")
    try:
        state = load_file(str(weights), device="cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        raise CelerisError(f"{weights}: corrupt or not a safetensors file ({exc})") from None
    model = InfillModel(cfg)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise CelerisError(f"{weights}: does not match {CONFIG} (missing {missing[:3]}, unexpected {extra[:3]})")
    for name, tensor in state.items():
        if tensor.shape != expected[name].shape:
            raise CelerisError(
                f"{weights}: tensor {name} has shape {tuple(tensor.shape)}, "
                f"{CONFIG} implies {tuple(expected[name].shape)}"
            )
        if not torch.isfinite(tensor).all():
            raise CelerisError(f"{weights}: tensor {name} holds NaN or infinite values")
    model.load_state_dict(state)
    model.eval().to(device)
    meta = {k: v for k, v in data.items() if k not in ("model", "special_tokens", "format")}
    return LoadedModel(model, tok, cfg, meta, path)
