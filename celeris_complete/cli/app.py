"""The ``celeris-complete`` application: its command groups, the options commands share, and how a
command fails."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from celeris_complete.errors import CelerisError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Local code completion with a diffusion model.")


@app.callback()
def _root() -> None:
    """Local code completion with a masked-diffusion model."""


TRUST_HELP = "Let a transformers model directory run its own Python code (only for a directory you trust)."
# The remote backend's options, shared by the commands that complete (infill, selftest).
EndpointOption = Annotated[
    Optional[str], typer.Option(help="Complete through this server (celeris-complete serve, or OpenAI-compatible).")
]
ApiOption = Annotated[Optional[str], typer.Option(help="The endpoint's API: fim, completions or chat.")]
ApiKeyEnvOption = Annotated[Optional[str], typer.Option(help="Environment variable holding the endpoint's API key.")]
# Options that many commands share.
ModelOption = Annotated[Optional[str], typer.Option(help="Model directory.")]
BackendOption = Annotated[Optional[str], typer.Option(help="auto, torch or onnx.")]
TrustOption = Annotated[bool, typer.Option("--trust-remote-code", help=TRUST_HELP)]
StepsOption = Annotated[Optional[int], typer.Option(help="Refinement steps.")]
QuantOption = Annotated[Optional[str], typer.Option(help="auto, none, int8 (CPU), bf16 (AMX, CUDA), fp16 (CUDA).")]
JsonOutputOption = Annotated[Optional[Path], typer.Option(help="Write the JSON here.")]
ThreadsOption = Annotated[Optional[int], typer.Option(help="CPU threads (0: all).")]
KeysPerSecondOption = Annotated[float, typer.Option(help="Typing speed.")]
DeviceOption = Annotated[Optional[str], typer.Option(help="auto, cpu or cuda.")]


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"celeris-complete: error: {message}", err=True)
    raise typer.Exit(code)


bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print numbers.")
app.add_typer(bench_app, name="bench")


def server_options(options: dict, setting: Optional[list[str]]) -> dict:
    """A benchmark's server settings: ``options`` (None: the default) and ``--set KEY=VALUE`` items, checked
    here (the server would only warn about a bad value and go on)."""
    from celeris_complete.config import coerce

    options = {k: v for k, v in options.items() if v is not None}
    for item in setting or ():
        key, sep, value = item.partition("=")
        if not sep:
            fail(f"--set {item}: give KEY=VALUE")
        options[key.strip()] = value.strip()
    try:
        return {key: coerce(key, value, "command line") for key, value in options.items()}
    except CelerisError as exc:
        fail(str(exc))
        raise


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
