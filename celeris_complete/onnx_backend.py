"""ONNX Runtime backend: the model exported as two graphs, context encode and span step.

Keys/values travel as one stacked array of shape (layers, 2, 1, heads, time,
head_dim); indexing it as ``kv[layer][0]`` gives that layer's keys, so the
decoding code treats it like the PyTorch backend's list of (keys, values).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

from .errors import CelerisError
from .model import InfillModel

CONTEXT_GRAPH = "context.onnx"
SPAN_GRAPH = "span_step.onnx"


class _SpanStep(torch.nn.Module):
    def __init__(self, model: InfillModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, slots: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        layers = [(kv[i, 0], kv[i, 1]) for i in range(kv.shape[0])]
        return self.model.span_step(slots, layers)


class _ContextEncode(torch.nn.Module):
    def __init__(self, model: InfillModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        layers = [(past[i, 0], past[i, 1]) for i in range(past.shape[0])]
        _, kv = self.model.encode_context(ids, layers)
        return torch.stack([torch.stack(pair) for pair in kv])


def cache_dir_for(weights: Path) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    h = hashlib.sha256()
    with weights.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return base / "celeris-complete" / "onnx" / h.hexdigest()[:16]


def export(model: InfillModel, out: Path, int8: bool = True) -> Path:
    """Write the two graphs (and their int8 versions) to ``out``; returns ``out``."""
    model = model.float().eval().cpu()
    cfg = model.cfg
    out.mkdir(parents=True, exist_ok=True)
    kv = torch.zeros(cfg.n_layers, 2, 1, cfg.n_heads, 16, cfg.head_dim)
    time_dim = torch.export.Dim("time", min=1, max=cfg.max_positions)
    past_dim = torch.export.Dim("past", min=0, max=cfg.max_positions)
    new_dim = torch.export.Dim("new", min=1, max=cfg.max_positions)
    canvas_dim = torch.export.Dim("canvas", min=1, max=cfg.max_canvas)
    jobs = [
        (
            _SpanStep(model),
            (torch.zeros(1, 8, dtype=torch.long), kv),
            ["slots", "kv"],
            ["logits"],
            ({1: canvas_dim}, {4: time_dim}),
            SPAN_GRAPH,
        ),
        (
            _ContextEncode(model),
            (torch.zeros(1, 8, dtype=torch.long), kv),
            ["ids", "past"],
            ["kv"],
            ({1: new_dim}, {4: past_dim}),
            CONTEXT_GRAPH,
        ),
    ]
    quiet = [logging.getLogger(name) for name in ("", "torch.onnx", "torch.export", "onnxscript")]
    levels = [log.level for log in quiet]
    for log in quiet:
        log.setLevel(logging.ERROR)
    try:
        _export_jobs(jobs, out, int8)
    finally:
        for log, level in zip(quiet, levels):
            log.setLevel(level)
    return out


def _export_jobs(jobs: list, out: Path, int8: bool) -> None:
    import contextlib
    import io

    for module, args, inputs, outputs, shapes, name in jobs:
        tmp = out / (name + ".tmp")
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                args,
                str(tmp),
                dynamo=True,
                input_names=inputs,
                output_names=outputs,
                dynamic_shapes=shapes,
                external_data=False,
            )
        tmp.replace(out / name)
        if int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            q_tmp = out / ("int8-" + name + ".tmp")
            quantize_dynamic(str(out / name), str(q_tmp), weight_type=QuantType.QInt8)
            q_tmp.replace(out / ("int8-" + name))


class OnnxModel:
    """Runs the exported graphs with ONNX Runtime behind the PyTorch model's two methods."""

    def __init__(self, model: InfillModel, weights: Path, device: str, quant: str, threads: int) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise CelerisError("onnxruntime is not installed (pip install 'celeris-complete[onnx]')") from None
        self.cfg = model.cfg
        graphs = cache_dir_for(weights)
        prefix = "int8-" if quant == "int8" else ""
        if not (graphs / (prefix + SPAN_GRAPH)).exists() or not (graphs / (prefix + CONTEXT_GRAPH)).exists():
            print(f"celeris-complete: exporting the model to ONNX once, into {graphs}", file=sys.stderr)
            export(model, graphs, int8=True)
        providers = ["CPUExecutionProvider"]
        if device == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise CelerisError("onnxruntime has no CUDA execution provider (pip install onnxruntime-gpu)")
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or (os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.span = ort.InferenceSession(str(graphs / (prefix + SPAN_GRAPH)), options, providers=providers)
        self.context = ort.InferenceSession(str(graphs / (prefix + CONTEXT_GRAPH)), options, providers=providers)
        self.graphs = graphs
        self._empty = np.zeros((self.cfg.n_layers, 2, 1, self.cfg.n_heads, 0, self.cfg.head_dim), np.float32)

    def encode_context(self, ids: torch.Tensor, past: torch.Tensor | None = None) -> tuple[None, torch.Tensor]:
        past_np = self._empty if past is None else np.ascontiguousarray(past.numpy())
        (kv,) = self.context.run(None, {"ids": ids.numpy(), "past": past_np})
        return None, torch.from_numpy(kv)

    def span_step(self, slots: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        (logits,) = self.span.run(None, {"slots": slots.numpy(), "kv": np.ascontiguousarray(kv.numpy())})
        return torch.from_numpy(logits)
