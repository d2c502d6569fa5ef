"""One configuration object, built from layered sources.

Precedence, lowest first: built-in defaults < user file
(``~/.config/celeris-complete/config.toml``) < project file
(``.celeris-complete.toml``, found from the working directory upwards) <
environment (``CELERIS_<KEY>``) < command line or LSP initializationOptions.
An unknown key or a bad value is an error naming the key and where it came from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from celeris_complete.errors import CelerisError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

PROJECT_FILE = ".celeris-complete.toml"
ENV_PREFIX = "CELERIS_"


@dataclass(frozen=True)
class Option:
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None


OPTIONS: dict[str, Option] = {
    "model": Option(str, "", "Model directory (empty: the shipped default model)."),
    "trust_remote_code": Option(bool, False, "Let a transformers model directory run its own Python code."),
    "backend": Option(str, "auto", "Inference backend.", choices=("auto", "torch", "onnx")),
    "device": Option(str, "auto", "Device.", choices=("auto", "cpu", "cuda")),
    "quant": Option(
        str,
        "auto",
        "Quantization: int8 (CPU), bf16 (CPUs with AMX, or CUDA), fp16 (CUDA); auto: int8 on the CPU "
        "(PyTorch backend, our own models), none elsewhere.",
        choices=("auto", "none", "int8", "bf16", "fp16"),
    ),
    "trace": Option(
        bool,
        True,
        "Run the refinement step and context encoding as traced TorchScript graphs: the same answers with less "
        "overhead per call (PyTorch backend, our own models).",
    ),
    "trace_cache": Option(
        str,
        "",
        "Where a model's traced graphs are kept, so that it is traced once and not at every start: a folder; "
        "empty: celeris-complete/traced in the user's cache folder ($XDG_CACHE_HOME, else ~/.cache); off: "
        "nowhere.",
    ),
    "endpoint": Option(
        str,
        "",
        "Complete through this server instead of a local model: the URL of `celeris-complete serve` or of an "
        "OpenAI-compatible server (e.g. http://127.0.0.1:8000). Only the windows around the cursor and the chosen "
        "snippets are sent.",
    ),
    "api_key_env": Option(str, "", "Name of the environment variable holding the endpoint's API key (bearer token)."),
    "api": Option(
        str,
        "fim",
        "The endpoint's API: fim (POST /v1/fim/completions), completions (POST /v1/completions with suffix) or "
        "chat (POST /v1/chat/completions, a fill-in-the-middle prompt: for providers that offer only chat).",
        choices=("fim", "completions", "chat"),
    ),
    "escalate_endpoint": Option(
        str,
        "",
        "A second tier: the language server asks this server (celeris-complete serve, vLLM, SGLang or a hosted "
        "API) when the local answer is below min_confidence; an automatic request is never kept waiting for it.",
    ),
    "escalate_api": Option(str, "fim", "The second tier's API (as api).", choices=("fim", "completions", "chat")),
    "escalate_api_key_env": Option(str, "", "The environment variable holding the second tier's API key."),
    "escalate_budget_ms": Option(
        float,
        2000.0,
        "How long a request the user made waits for the second tier's answer (the local one stands after it).",
        minimum=50.0,
        maximum=30000.0,
    ),
    "edit_endpoint": Option(
        str,
        "",
        "A server answering POST /v1/edit/completions (celeris-complete serve, or Inception's Mercury Edit API): "
        "the language server asks it for the next edit where propagation finds none.",
    ),
    "edit_model": Option(str, "", "The model named in requests to edit_endpoint (empty: none named)."),
    "edit_api_key_env": Option(str, "", "The environment variable holding edit_endpoint's API key."),
    "edit_budget_ms": Option(
        float, 1500.0, "How long a next edit waits for edit_endpoint's answer.", minimum=50.0, maximum=30000.0
    ),
    "next_edit_local": Option(
        bool, True, "Propagate the user's edits on this machine (false: only edit_endpoint predicts next edits)."
    ),
    "mode": Option(str, "auto", "Completion size.", choices=("auto", "line", "block")),
    "steps": Option(int, 4, "Refinement steps (latency/quality dial).", minimum=1, maximum=64),
    "threshold": Option(float, 0.9, "Commit every slot at least this confident.", minimum=0.0, maximum=1.0),
    "eos_penalty": Option(float, 0.0, "Subtracted from the end-of-span logit.", minimum=0.0, maximum=20.0),
    "eos_penalty_line": Option(
        float,
        None,
        "The same in line mode (unset: eos_penalty). A line may end early: no answer beats a wrong one.",
        minimum=0.0,
        maximum=20.0,
    ),
    "temperature": Option(float, 0.0, "0 = greedy.", minimum=0.0, maximum=5.0),
    "seed": Option(int, 0, "Seed for sampling when temperature > 0.", minimum=0),
    "canvas_line": Option(int, 24, "Canvas slots in line mode.", minimum=1, maximum=64),
    "canvas_block": Option(int, 64, "Canvas slots in block mode.", minimum=1, maximum=64),
    "prefix_tokens": Option(int, 256, "Context budget before the cursor.", minimum=1, maximum=4096),
    "suffix_tokens": Option(int, 96, "Context budget after the cursor.", minimum=0, maximum=4096),
    "snippet_tokens": Option(
        int, 80, "Context budget for snippets from other open documents and workspace files.", minimum=0, maximum=4096
    ),
    "workspace_index": Option(bool, True, "Index workspace files (respecting .gitignore) for snippets."),
    "budget_ms": Option(float, 100.0, "Keystroke latency budget.", minimum=1.0, maximum=60000.0),
    "threads": Option(int, 0, "CPU threads (0: all cores).", minimum=0, maximum=1024),
    "fill_marker": Option(str, "<FILL>", "Marker that `infill` fills in a file."),
    "max_chars_after_cursor": Option(
        int, 3, "No automatic completion when more characters than this follow the cursor on its line.", minimum=0
    ),
    "drafts": Option(
        bool, True, "Offer the model the line's most common continuation in the document and workspace to verify."
    ),
    "draft_threshold": Option(
        float,
        0.0,
        "Keep a drafted token when it is the model's top token, or when the model gives it at least this probability "
        "(and no veto applies).",
        minimum=0.0,
        maximum=1.0,
    ),
    "min_confidence": Option(
        float,
        0.0,
        "The language server shows an automatic completion only when the model's calibrated probability that it "
        "is right is at least this (0: every answer; the model's confidence.json recommends one per place of the "
        "cursor, used unless you set a value, which then holds everywhere). Invoked completions are always shown.",
        minimum=0.0,
        maximum=1.0,
    ),
    "draft_veto": Option(
        float,
        1.0,
        "Refuse a drafted token when the model's top token there is another one with at least this probability.",
        minimum=0.0,
        maximum=1.0,
    ),
    "draft_candidates": Option(
        int, 1, "Drafts the model judges per completion (the best is kept).", minimum=1, maximum=8
    ),
    "draft_batch": Option(
        bool,
        False,
        "Judge each draft with its own tokens in the canvas (all drafts in one batched model call) rather than by "
        "the first step's prediction alone.",
    ),
    "syntax_candidates": Option(
        int,
        4,
        "Python: when the compiler puts a syntax error in the answer's own lines, try it re-indented, shortened "
        "and finished (brackets closed, a colon), then sample this many other answers in one batch (fewer for "
        "a block: as many slots as this many line canvases) and take the first that compiles; none does: "
        "nothing where the code compiled without the answer (or only the line being typed broke it), else the "
        "answer as it was; 0: off.",
        minimum=0,
        maximum=16,
    ),
    "adapt": Option(
        bool,
        False,
        "Language server: adapt the model to the workspace in the background (low priority, paused while you "
        "type) and switch to it once it does at least as well as the base model on held-out workspace files.",
    ),
    "adapt_minutes": Option(float, 10.0, "Training time of a background adaptation.", minimum=0.1, maximum=1440.0),
    "adapt_memory_mb": Option(
        float,
        2048.0,
        "Memory budget of an adaptation (`adapt` and the language server's background one), in MB: the "
        "training batch is split into passes that fit it on this machine.",
        minimum=256.0,
        maximum=1048576.0,
    ),
    "alternatives": Option(int, 3, "Completions offered when the user asks for them.", minimum=1, maximum=10),
    "ignore_globs": Option(list, (), "Files (globs on the path) never completed."),
    "secret_globs": Option(
        list,
        (".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", "*.p12", "*.pfx", "*secret*", "*credential*"),
        "Files that look like secrets: never read, indexed or completed.",
    ),
}


@dataclass(frozen=True)
class Settings:
    values: Mapping[str, Any]
    sources: Mapping[str, str] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def source(self, key: str) -> str:
        return self.sources.get(key, "default")

    def with_overrides(self, overrides: Mapping[str, Any], source: str) -> Settings:
        values, sources = dict(self.values), dict(self.sources)
        for key, raw in overrides.items():
            if raw is None:
                continue
            values[key] = coerce(key, raw, source)
            sources[key] = source
        return Settings(values, sources)


def coerce(key: str, raw: Any, source: str) -> Any:
    """The value for ``key`` from ``raw`` (TOML value or string), or an error naming both."""
    key_norm = key.replace("-", "_")
    opt = OPTIONS.get(key_norm)
    if opt is None:
        raise CelerisError(f"{source}: unknown setting '{key}' (known: {', '.join(sorted(OPTIONS))})")
    try:
        if opt.kind is list:
            if isinstance(raw, str):
                raw = [part.strip() for part in raw.split(",") if part.strip()]
            if not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) for x in raw):
                raise ValueError
            value = tuple(raw)
        elif opt.kind is bool:
            value = raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes", "on")
        elif opt.kind is int:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            value = int(raw)
        elif opt.kind is float:
            if isinstance(raw, bool):
                raise ValueError
            value = float(raw)
        else:
            if not isinstance(raw, str):
                raise ValueError
            value = raw
    except (TypeError, ValueError):
        raise CelerisError(f"{source}: setting '{key}' must be a {opt.kind.__name__}, got {raw!r}") from None
    if opt.choices and value not in opt.choices:
        raise CelerisError(f"{source}: setting '{key}' must be one of {', '.join(opt.choices)}, got {value!r}")
    if opt.minimum is not None and value < opt.minimum:
        raise CelerisError(f"{source}: setting '{key}' must be >= {opt.minimum}, got {value!r}")
    if opt.maximum is not None and value > opt.maximum:
        raise CelerisError(f"{source}: setting '{key}' must be <= {opt.maximum}, got {value!r}")
    return value


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "celeris-complete" / "config.toml"


def find_project_file(start: Path) -> Path | None:
    start = start.resolve()
    for directory in (start, *start.parents):
        candidate = directory / PROJECT_FILE
        if candidate.is_file():
            return candidate
    return None


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise CelerisError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise CelerisError(f"{path}: cannot be read ({exc.strerror})") from None
    for key, value in data.items():
        if isinstance(value, dict):
            raise CelerisError(f"{path}: unexpected table [{key}]; settings are top-level keys")
    return data


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key not in OPTIONS:
            raise CelerisError(f"environment variable {name}: unknown setting '{key}'")
        out[key] = value
    return out


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    overrides_source: str = "command line",
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    user_file: Path | None = None,
) -> Settings:
    settings = Settings({k: o.default for k, o in OPTIONS.items()})
    user_file = user_file if user_file is not None else user_config_path()
    if user_file.is_file():
        settings = settings.with_overrides(read_toml(user_file), str(user_file))
    project = find_project_file(cwd or Path.cwd())
    if project is not None:
        settings = settings.with_overrides(read_toml(project), str(project))
    env = environ if environ is not None else os.environ
    for key, value in env_overrides(env).items():
        settings = settings.with_overrides({key: value}, f"environment variable {ENV_PREFIX}{key.upper()}")
    if overrides:
        settings = settings.with_overrides(overrides, overrides_source)
    return settings
