"""``infill``: complete one place in a file or in text on standard input."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from celeris_complete.cli.app import (
    ApiKeyEnvOption,
    ApiOption,
    BackendOption,
    DeviceOption,
    EndpointOption,
    ModelOption,
    QuantOption,
    StepsOption,
    TrustOption,
    app,
    fail,
)
from celeris_complete.errors import CelerisError


def read_source(target: str) -> tuple[str, Path | None]:
    """The text of FILE (or stdin for "-"), refusing binary or undecodable input clearly."""
    if target == "-":
        data = sys.stdin.buffer.read()
        path = None
        name = "standard input"
    else:
        path = Path(target)
        name = str(path)
        if not path.is_file():
            fail(f"{name}: no such file")
        try:
            data = path.read_bytes()
        except OSError as exc:
            fail(f"{name}: cannot be read ({exc.strerror})")
    if b"\0" in data[:8192]:
        fail(f"{name}: looks like a binary file (it holds NUL bytes); refusing to complete it")
    try:
        return data.decode("utf-8"), path
    except UnicodeDecodeError as exc:
        fail(
            f"{name}: not valid UTF-8 (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); refusing to complete it"
        )
    raise AssertionError  # unreachable


def split_target(target: str) -> tuple[str, int | None, int | None]:
    """FILE:LINE:COL -> (FILE, LINE, COL) when FILE itself does not exist under that name."""
    parts = target.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit() and not Path(target).exists():
        return parts[0], int(parts[1]), int(parts[2])
    return target, None, None


def offset_of(text: str, line: int, col: int) -> int:
    """Character offset of 1-based LINE and COL (COL in characters, one past the end allowed)."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        fail(f"line {line} is out of range: the text has {len(lines)} lines")
    current = lines[line - 1].rstrip("\r")
    if not 1 <= col <= len(current) + 1:
        fail(f"column {col} is out of range: line {line} has {len(current)} characters")
    return sum(len(ln) + 1 for ln in lines[: line - 1]) + col - 1


@app.command()
def infill(
    target: Annotated[str, typer.Argument(help="FILE, FILE:LINE:COL, or - for standard input.")],
    line: Annotated[Optional[int], typer.Option("--line", "-l", help="1-based line of the cursor.")] = None,
    col: Annotated[Optional[int], typer.Option("--col", "-c", help="1-based column (characters).")] = None,
    model: ModelOption = None,
    mode: Annotated[Optional[str], typer.Option(help="auto, line or block.")] = None,
    steps: StepsOption = None,
    threshold: Annotated[Optional[float], typer.Option(help="Confidence threshold.")] = None,
    eos_penalty: Annotated[Optional[float], typer.Option(help="End-of-span penalty (both modes).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help="Canvas slots (completion length cap).")] = None,
    device: DeviceOption = None,
    backend: BackendOption = None,
    quant: QuantOption = None,
    marker: Annotated[Optional[str], typer.Option(help="Hole marker to fill (default <FILL>).")] = None,
    endpoint: EndpointOption = None,
    api: ApiOption = None,
    api_key_env: ApiKeyEnvOption = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Write the filled file back (FILE~ keeps the original).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON with timings.")] = False,
    trust_remote_code: TrustOption = False,
) -> None:
    """Fill the hole at the cursor, or every marker in a file, with the model."""

    from celeris_complete.config import load_settings

    path_str, t_line, t_col = split_target(target)
    line, col = line or t_line, col or t_col
    if (line is None) != (col is None):
        fail("give both --line and --col (or FILE:LINE:COL)")
    overrides = dict(
        model=model,
        mode=mode,
        steps=steps,
        threshold=threshold,
        eos_penalty=eos_penalty,
        eos_penalty_line=eos_penalty,
        device=device,
        backend=backend,
        quant=quant,
        fill_marker=marker,
        trust_remote_code=trust_remote_code or None,
        endpoint=endpoint,
        api=api,
        api_key_env=api_key_env,
    )
    try:
        settings = load_settings(overrides)
        if settings.source("trace") == "default":  # one-shot: tracing (about a second) would cost more than it saves
            settings = settings.with_overrides({"trace": False}, "infill")
    except CelerisError as exc:
        fail(str(exc))
    # The input is checked before the model loads (torch's import and the model take seconds): a mistake
    # in it is reported at once.
    text, path = read_source(path_str)
    cursor = offset_of(text, line, col) if line is not None else None
    hole = settings.fill_marker
    if cursor is None and hole not in text:
        fail(f"no {hole} marker in {path or 'standard input'}; give a position with --line/--col or FILE:LINE:COL")
    from celeris_complete.engine import Engine, InfillRequest

    try:
        engine = Engine(settings)
    except CelerisError as exc:
        fail(str(exc))
    newline = "\r\n" if "\r\n" in text else "\n"
    language = "python" if path_str == "-" else path_str  # a .py file's answers are checked by the parser
    notice = getattr(engine.impl, "announcement", lambda: None)()
    if notice:
        typer.echo(notice, err=True)

    def run(prefix: str, suffix: str):
        try:
            done = engine.complete(InfillRequest(prefix, suffix, max_tokens=max_tokens, language=language))
        except CelerisError as exc:  # a remote endpoint that fails
            fail(str(exc))
        return done, done.text.replace("\n", newline) if newline != "\n" else done.text

    if cursor is not None:
        done, completion = run(text[:cursor], text[cursor:])
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "completion": completion,
                        "mode": done.mode,
                        "steps": done.steps,
                        "tokens": done.tokens,
                        "confidence": done.confidence,
                        "timings_ms": done.timings_ms,
                    }
                )
            )
        else:
            typer.echo(completion)
        return
    pieces = text.split(hole)
    results = []
    filled = pieces[0]
    for i in range(1, len(pieces)):
        suffix = "".join(pieces[i:])  # later holes stay empty in the suffix
        done, completion = run(filled, suffix)
        results.append(
            {
                "completion": completion,
                "mode": done.mode,
                "steps": done.steps,
                "tokens": done.tokens,
                "confidence": done.confidence,
                "timings_ms": done.timings_ms,
            }
        )
        filled += completion + pieces[i]
    if as_json:
        typer.echo(json.dumps({"holes": results}))
    elif in_place and path is not None:
        from celeris_complete.cli.safe_write import replace_file

        backup = path.with_name(path.name + "~")
        try:
            replace_file(path, text.encode("utf-8"), filled.encode("utf-8"), backup)
        except CelerisError as exc:
            fail(str(exc))
        typer.echo(f"filled {len(results)} hole(s) in {path} (original kept as {backup})", err=True)
    else:
        sys.stdout.write(filled)
        sys.stdout.flush()
    for i, r in enumerate(results, 1):
        t = r["timings_ms"]
        typer.echo(
            f"hole {i}: {r['mode']} mode, {r['tokens']} tokens, {r['steps']} steps, "
            f"{t['total']:.1f} ms (context {t['context_encode']:.1f}, refine {t['refine']:.1f})",
            err=True,
        )
