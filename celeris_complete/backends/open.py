"""Opening the backend the settings ask for; each kind is imported only when chosen (transformers,
httpx and ONNX Runtime are optional)."""

from __future__ import annotations

from pathlib import Path

from celeris_complete.backends.base import Backend, resolve_device
from celeris_complete.config import Settings


def open_backend(settings: Settings, trace_in_background: bool = False) -> Backend:
    """The backend the settings ask for: a remote server when ``endpoint`` is set, else the model
    directory's kind (a transformers config.json, or our own format)."""
    if settings.endpoint:
        from celeris_complete.backends.remote import RemoteBackend

        return RemoteBackend(settings)
    import torch

    from celeris_complete.backends.hf_model import is_transformers_dir
    from celeris_complete.model.directory import default_model_dir

    path = Path(settings.model).expanduser() if settings.model else default_model_dir()
    device = resolve_device(settings)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    if is_transformers_dir(path):
        from celeris_complete.backends.hf import TransformersBackend

        return TransformersBackend(path, device, settings)
    from celeris_complete.backends.ours import OurBackend

    return OurBackend(path, device, settings, trace_in_background)
