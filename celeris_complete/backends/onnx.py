"""ONNX Runtime backend: the model exported as two graphs, context encode and span step.

Keys/values travel as one input or output per layer and kind (``k0``, ``v0``,
``k1``, ...), each (1, heads, time, head_dim), and come back as the PyTorch
backend's list of (keys, values) without copies, so the engine, the context
cache and the decoding treat both backends alike.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import weights_digest
from celeris_complete.model.network import FlatContextEncode, FlatSpanStep, InfillModel, flatten_kv, pair_kv

CONTEXT_GRAPH = "context.onnx"
SPAN_GRAPH = "span_step.onnx"


FORMAT = "kv-per-layer-1"  # part of the cache folder's name: a new graph interface exports anew


def kv_names(n_layers: int, prefix: str = "") -> list[str]:
    return [f"{prefix}{kind}{i}" for i in range(n_layers) for kind in ("k", "v")]


def cache_dir_for(weights: Path) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "celeris-complete" / "onnx" / f"{weights_digest(weights)[:16]}-{FORMAT}"


def export(model: InfillModel, out: Path, int8: bool = True) -> Path:
    """Write the two graphs (and their int8 versions) to ``out``; returns ``out``."""
    model = model.float().eval().cpu()
    cfg = model.cfg
    out.mkdir(parents=True, exist_ok=True)
    kv = tuple(torch.zeros(1, cfg.n_heads, 16, cfg.head_dim) for _ in range(2 * cfg.n_layers))
    time_dim = torch.export.Dim("time", min=1, max=cfg.max_positions)
    past_dim = torch.export.Dim("past", min=0, max=cfg.max_positions)
    new_dim = torch.export.Dim("new", min=1, max=cfg.max_positions)
    canvas_dim = torch.export.Dim("canvas", min=1, max=cfg.max_canvas)
    names, past_names = kv_names(cfg.n_layers), kv_names(cfg.n_layers, "past_")
    jobs = [
        (
            FlatSpanStep(model),
            (torch.zeros(1, 8, dtype=torch.long), *kv),
            ["slots", *names],
            ["logits"],
            ({1: canvas_dim}, tuple({2: time_dim} for _ in kv)),
            SPAN_GRAPH,
        ),
        (
            FlatContextEncode(model),
            (torch.zeros(1, 8, dtype=torch.long), *kv),
            ["ids", *past_names],
            names,
            ({1: new_dim}, tuple({2: past_dim} for _ in kv)),
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

    batched = False  # the graphs are exported for one canvas (batch 1): alternatives decode one at a time

    def __init__(self, model: InfillModel, weights: Path, device: str, quant: str, threads: int) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise CelerisError("onnxruntime is not installed (pip install 'celeris-complete[onnx]')") from None
        self.cfg = model.cfg
        providers = ["CPUExecutionProvider"]
        if device == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise CelerisError("onnxruntime has no CUDA execution provider (pip install onnxruntime-gpu)")
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        graphs = cache_dir_for(weights)
        prefix = "int8-" if quant == "int8" else ""
        if not (graphs / (prefix + SPAN_GRAPH)).exists() or not (graphs / (prefix + CONTEXT_GRAPH)).exists():
            print(f"celeris-complete: exporting the model to ONNX once, into {graphs}", file=sys.stderr)
            export(model, graphs, int8=True)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or (os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # ONNX Runtime's threads busy-wait between runs by default; between two runs the engine's own
        # (PyTorch) work needs the same cores, and on 2 cores the spinning made each step 3x slower.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.span = ort.InferenceSession(str(graphs / (prefix + SPAN_GRAPH)), options, providers=providers)
        self.context = ort.InferenceSession(str(graphs / (prefix + CONTEXT_GRAPH)), options, providers=providers)
        self.graphs = graphs
        self.names = kv_names(self.cfg.n_layers)
        self.past_names = kv_names(self.cfg.n_layers, "past_")
        empty = np.zeros((1, self.cfg.n_heads, 0, self.cfg.head_dim), np.float32)
        self._empty = dict.fromkeys(self.past_names, empty)

    def encode_context(self, ids: torch.Tensor, past: list | None = None) -> tuple[None, list]:
        feed = {"ids": ids.numpy()}
        if past is None:
            feed.update(self._empty)
        else:
            feed.update((n, np.ascontiguousarray(t.numpy())) for n, t in zip(self.past_names, flatten_kv(past)))
        return None, pair_kv([torch.from_numpy(a) for a in self.context.run(None, feed)])

    def span_step(self, slots: torch.Tensor, kv: list) -> torch.Tensor:
        feed = {"slots": slots.numpy()}
        feed.update((n, np.ascontiguousarray(t.numpy())) for n, t in zip(self.names, flatten_kv(kv)))
        (logits,) = self.span.run(None, feed)
        return torch.from_numpy(logits)
