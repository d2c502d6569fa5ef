"""Line completions in real Python packages the model never saw, through the real language server.

Each package (pinned in ``PACKAGES``, none of them in the training corpus) is
downloaded as a wheel with pip into a cache outside the repository
(``$XDG_CACHE_HOME/celeris-complete/bench-repo``, ``~/.cache`` by default) when
the benchmark runs, never at import, and its ``.py`` files are unpacked there
once, as the corpus packages are.

Per package, a few files under test are chosen (seeded) and the sites are
spread evenly over them: half with the cursor right after a line's
indentation, half mid-line at a token boundary.  A site's line must keep at
least ``MIN_REST`` non-blank characters after the cursor (blank lines and
comment lines never qualify).  The expected answer is the rest of the line.

Design: one server per package, not per file.  The workspace the server gets
(``workspaceFolders``, so its snippet index is in play as in an editor) is a
temporary copy of the package from which *all* files under test were deleted
before the server started, so no site's answer can come back from the index;
the server then costs one start per package.  The price is that the index
lacks every file under test, not only the one being edited, so at most half
of a package's files are put under test (a package of one file, tabulate,
leaves an empty index).  For each site the file is opened (``didOpen``) with
the rest of the target line removed, one automatic ``textDocument/inlineCompletion``
is sent at the cursor, and the file is closed again; only that document is
open, so other open buffers never serve as snippets.  The first line of the
returned text (what the editor would insert at the cursor), trailing blanks
stripped, is compared with the expected text: exact match and edit similarity
(1 - Levenshtein distance / the longer length).  Latency is the client's, per
request.  Server settings are its defaults unless given (int8 on the CPU, the
keystroke budget as the decoding deadline): the figures are what a user gets
on this machine.  On a busy machine the deadline passes before the steps are
done and the quality falls with it: ``over_budget`` says how often that
happened (``--budget-ms`` lifts the deadline for load-independent figures).

Positions in the results (``line``, ``col``) are 0-based, ``col`` in characters.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from celeris_complete.bench.lsp import inline_completion, plain, start_server, stop_server
from celeris_complete.bench.repo_languages import (  # (bench repo's packages: where they come from)
    LANGUAGES,
    fetch_source,
    source_files,
)
from celeris_complete.bench.selftest import percentile
from celeris_complete.errors import CelerisError

# Never among the training corpus's packages (corpus_packages.PINNED): the tests check it.  Python's;
# the other languages' are in repo_languages.LANGUAGES.
PACKAGES: tuple[tuple[str, str], ...] = tuple((p.name, p.version) for p in LANGUAGES["python"].packages)
MIN_REST = 4  # non-blank characters a site leaves to complete
MIN_FILE_LINES = 20  # lines with sites of both kinds a file needs to be put under test
TOKEN = re.compile(r"\w+|[^\w\s]")
REQUEST_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Site:
    file: str  # path in the package, POSIX separators
    line: int
    col: int
    kind: str  # "indent" or "mid"
    expected: str  # the rest of the line, trailing blanks stripped


# ---- the sites ------------------------------------------------------------------------------
def _nonblank(text: str) -> int:
    return sum(not c.isspace() for c in text)


def cursor_columns(line: str, comments: tuple[str, ...] = ("#",)) -> tuple[int | None, list[int]]:
    """Where a site may put the cursor in ``line``: (after the indentation or None, mid-line token
    boundaries), each leaving at least ``MIN_REST`` non-blank characters after it.  A line that starts
    with one of ``comments`` has none."""
    body = line.rstrip()
    content = body.lstrip()
    if not content or content.startswith(comments):
        return None, []
    indent = len(body) - len(content)
    start = indent if _nonblank(content) >= MIN_REST else None
    edges = {m.start() for m in TOKEN.finditer(body)} | {m.end() for m in TOKEN.finditer(body)}
    mids = sorted(p for p in edges if indent < p and _nonblank(body[p:]) >= MIN_REST)
    return start, mids


def choose_sites(
    files: Mapping[str, str],
    count: int,
    max_files: int,
    seed: int | str = 0,
    max_share: float = 0.5,
    comments: tuple[str, ...] = ("#",),
) -> list[Site]:
    """``count`` sites over at most ``max_files`` files (and at most ``max_share`` of the files given),
    half after the indentation and half mid-line, chosen by ``seed``; sorted by file and line."""
    rng = random.Random(f"bench-repo:{seed}")
    columns = {name: [cursor_columns(line, comments) for line in text.split("\n")] for name, text in files.items()}
    # A line with room for a mid-line site has room for one after its indentation too.
    room = {name: sum(bool(mids) for _, mids in cols) for name, cols in columns.items()}
    usable = sorted(name for name, n in room.items() if n >= MIN_FILE_LINES)
    n_files = min(max_files, len(usable), max(1, int(len(files) * max_share)))
    if count <= 0 or n_files <= 0:
        return []
    chosen = sorted(rng.sample(usable, n_files))
    quotas = dict.fromkeys(chosen, 0)
    while sum(quotas.values()) < count and any(quotas[f] < room[f] for f in chosen):
        for name in chosen:  # even shares, a small file's shortfall going to the others
            if quotas[name] < room[name] and sum(quotas.values()) < count:
                quotas[name] += 1
    sites: list[Site] = []
    slot = 0  # the kinds alternate over all slots, so the package's sites split in halves
    for name in chosen:
        kinds = ["indent" if (slot + k) % 2 == 0 else "mid" for k in range(quotas[name])]
        slot += quotas[name]
        lines = files[name].split("\n")
        cols = columns[name]
        order = rng.sample(range(len(lines)), len(lines))
        want_mid, want_indent = kinds.count("mid"), kinds.count("indent")
        taken: set[int] = set()
        for n in order:  # mid-line sites first: fewer lines have room for them
            if want_mid and cols[n][1]:
                col = rng.choice(cols[n][1])
                sites.append(Site(name, n, col, "mid", lines[n][col:].rstrip()))
                taken.add(n)
                want_mid -= 1
        for n in order:
            if want_indent and n not in taken and cols[n][0] is not None:
                col = cols[n][0]
                sites.append(Site(name, n, col, "indent", lines[n][col:].rstrip()))
                want_indent -= 1
    return sorted(sites, key=lambda s: (s.file, s.line))


def cut_text(text: str, site: Site) -> str:
    """The file as the editor holds it at the site: the rest of the target line removed."""
    lines = text.split("\n")
    lines[site.line] = lines[site.line][: site.col]
    return "\n".join(lines)


def site_context(text: str, site: Site) -> tuple[str, str]:
    """(prefix, suffix) around the cursor in ``cut_text``: what a completion at the site is asked with."""
    lines = text.split("\n")
    prefix = "\n".join(lines[: site.line] + [lines[site.line][: site.col]])
    return prefix, "\n" + "\n".join(lines[site.line + 1 :])


# ---- scoring --------------------------------------------------------------------------------
def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def edit_similarity(a: str, b: str) -> float:
    longest = max(len(a), len(b))
    return 1.0 if longest == 0 else 1.0 - levenshtein(a, b) / longest


def score(expected: str, got: str) -> dict:
    """Exact match, edit similarity and emptiness of the first line of ``got`` against ``expected``."""
    first = got.split("\n", 1)[0].rstrip()
    expected = expected.rstrip()
    similarity = edit_similarity(first, expected)
    return {"got": first, "exact": first == expected, "similarity": similarity, "empty": not first}


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def inserted_at_cursor(item: types.InlineCompletionItem, line_before: str) -> str:
    """What accepting ``item`` puts after the cursor: its text less the part of the line it
    replaces before the cursor (an item's range may start before it; the cursor ends the range)."""
    text = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
    if item.range is None or item.range.start.line != item.range.end.line:
        return text
    start, units = 0, 0
    while start < len(line_before) and units < item.range.start.character:
        units += _utf16(line_before[start])
        start += 1
    replaced = line_before[start:]
    return text[len(replaced) :] if text.startswith(replaced) else text


# ---- the run --------------------------------------------------------------------------------
async def _ask(
    client: LanguageClient,
    work: Path,
    text: str,
    site: Site,
    notes: list,
    budget_ms: float,
    invoked: bool = False,
    language_id: str = "python",
) -> dict:
    """Open the file as it is at ``site``, request a completion at the cursor, close it: the site's result.
    ``invoked``: the request a user makes (with alternatives) rather than an automatic one; every item's
    first line is kept (``offered``) and whether one of them is exact (``exact_offered``)."""
    path = work / site.file
    if path.exists():
        raise RuntimeError(f"{site.file} is under test but in the server's workspace")
    uri = path.as_uri()
    before = text.split("\n")[site.line][: site.col]
    item = types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=cut_text(text, site))
    client.text_document_did_open(types.DidOpenTextDocumentParams(item))
    notes.clear()
    sent = time.perf_counter()
    answer = await asyncio.wait_for(
        inline_completion(client, uri, site.line, _utf16(before), invoked), REQUEST_TIMEOUT_S
    )
    took_ms = (time.perf_counter() - sent) * 1e3
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    items = answer.items if answer else []
    got = inserted_at_cursor(items[0], before) if items else ""
    note = notes[-1] if notes else None  # the server's timings, sent just before its answer
    engine_ms = getattr(getattr(note, "engine_ms", None), "total", None)
    root = str(work) + os.sep
    hidden = getattr(note, "hidden", None)
    offered = {}
    if invoked:
        lines = [score(site.expected, inserted_at_cursor(item, before))["got"] for item in items]
        offered = {"offered": lines, "exact_offered": site.expected.rstrip() in lines}
    return {
        **asdict(site),
        **score(site.expected, got),
        **offered,
        "answer": got if items else None,  # all of it (None: no item at all)
        "latency_ms": round(took_ms, 2),
        "source": getattr(note, "source", None),  # "model" or "typing-cache"
        "steps": getattr(note, "steps", None),
        # The decoding deadline passed: the slots left were committed at once.
        "over_budget": engine_ms is not None and engine_ms >= budget_ms,
        "snippets": [s.source.removeprefix(root) for s in (getattr(note, "snippets", None) or [])],
        "draft": plain(getattr(note, "draft", None)),  # offered to the model: source, tokens, kept
        "syntax": getattr(note, "syntax", None),  # the compiler's verdict on the answer
        "raw": getattr(note, "raw", None),  # the model's span before post-processing
        "confidence": getattr(note, "confidence", None),  # the calibrated probability that it is right
        "min_confidence": getattr(note, "min_confidence", None),  # the threshold in force there
        # The answer the server held back as too unsure (min_confidence), and whether it was right.
        "hidden": hidden,
        "hidden_exact": bool(hidden) and score(site.expected, hidden)["exact"],
    }


async def _serve_sites(
    root: Path,
    files: Mapping[str, str],
    sites: Sequence[Site],
    options: dict,
    invoked: bool = False,
    language_id: str = "python",
) -> dict:
    """Run ``sites`` against a server whose workspace is a copy of ``root`` without the files under test."""
    under_test = sorted({s.file for s in sites})
    with tempfile.TemporaryDirectory(prefix="celeris-bench-repo-") as tmp:
        work = Path(tmp).resolve() / root.name
        shutil.copytree(root, work)
        for name in under_test:
            (work / name).unlink()
        notes: list = []

        def on_timings(params) -> None:
            notes.append(params)

        client, ready_s, _ = await start_server(options, work, on_timings, wait_for_index=True)
        try:
            on_disk = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file())
            status = await client.protocol.send_request_async("celeris/status", {})
            budget_ms = status.settings.budget_ms
            results = [
                await _ask(client, work, files[s.file], s, notes, budget_ms, invoked, language_id) for s in sites
            ]
        finally:
            await stop_server(client)
    return {
        "server_ready_s": round(ready_s, 2),
        "files_under_test": under_test,
        "workspace_files": on_disk,
        "indexed_files": status.snippet_index.files,
        "server_settings": plain(status.settings),
        "results": results,
    }


def _figures(results: Sequence[dict]) -> dict:
    n = len(results)
    if not n:
        return {"sites": 0}
    offered = {}
    if all("exact_offered" in r for r in results):  # invoked requests: one of the items exact
        offered = {"exact_offered": round(sum(r["exact_offered"] for r in results) / n, 4)}
    return {
        "sites": n,
        "exact_match": round(sum(r["exact"] for r in results) / n, 4),
        **offered,
        "edit_similarity": round(sum(r["similarity"] for r in results) / n, 4),
        "empty_rate": round(sum(r["empty"] for r in results) / n, 4),
        "no_item_rate": round(sum(r["answer"] is None for r in results) / n, 4),  # a part of the empty ones
        # Lines shown: right (exact) and wrong (a line that is not the rest); and what staying quiet
        # (min_confidence) held back, right and wrong.
        "right_shown": sum(bool(r["exact"]) for r in results),
        "wrong_shown": sum(not r["exact"] and not r["empty"] for r in results),
        "right_hidden": sum(bool(r.get("hidden_exact")) for r in results),
        "wrong_hidden": sum(bool(r.get("hidden")) and not r.get("hidden_exact") for r in results),
        **precision_coverage(results),
        # Answers with a form only Python has in a document in another language (checks/languages.py):
        # withheld, or cut before that line.
        "foreign_withheld": sum(r.get("syntax") == "foreign" for r in results),
    }


def precision_coverage(results: Sequence[dict]) -> dict:
    """Of the lines shown, the share right (precision); of the answers there were (shown or held back as
    unsure), the share shown (coverage)."""
    shown = [r for r in results if not r["empty"]]
    answered = len(shown) + sum(bool(r.get("hidden")) for r in results)
    return {
        "precision": round(sum(bool(r["exact"]) for r in shown) / len(shown), 4) if shown else None,
        "coverage": round(len(shown) / answered, 4) if answered else None,
    }


def confidence_points(results: Sequence[dict]) -> tuple[list[float], list[int], list[float]]:
    """Every answer with a confidence, shown or held back: (its confidence, whether it was right, the
    threshold in force there), for the reliability diagram and the precision/coverage curve."""
    p, y, t = [], [], []
    for r in results:
        if r.get("confidence") is None or not (r.get("hidden") or not r["empty"]):
            continue
        p.append(float(r["confidence"]))
        y.append(int(bool(r["hidden_exact"] if r.get("hidden") else r["exact"])))
        t.append(float(r.get("min_confidence") or 0.0))
    return p, y, t


def _share(rows: Sequence[dict], key: str) -> float | None:
    return round(sum(bool(r[key]) for r in rows) / len(rows), 4) if rows else None


def summarize(results: Sequence[dict]) -> dict:
    """Figures over ``results``: all sites, then each cursor kind; client latency percentiles; of the
    model's answers, the share that ran past the decoding deadline and the share with snippets."""
    latencies = [r["latency_ms"] for r in results]
    model_calls = [r for r in results if r["source"] == "model"]
    return {
        **_figures(results),
        "by_kind": {kind: _figures([r for r in results if r["kind"] == kind]) for kind in ("indent", "mid")},
        "latency_ms_p50": round(percentile(latencies, 50), 2) if latencies else None,
        "latency_ms_p95": round(percentile(latencies, 95), 2) if latencies else None,
        "over_budget": _share(model_calls, "over_budget"),
        "with_snippets": _share(model_calls, "snippets"),
        "with_draft": _share(model_calls, "draft"),
    }


def evaluate_folder(
    root: Path,
    sites: int,
    max_files: int = 4,
    seed: int | str = 0,
    options: dict | None = None,
    invoked: bool = False,
    language: str = "python",
) -> dict:
    """Choose sites in the package at ``root`` and answer them with one server (see the module doc)."""
    lang = LANGUAGES[language]
    files = source_files(root, lang.suffixes)
    chosen = choose_sites(files, sites, max_files, seed, comments=lang.comments)
    if not chosen:
        raise CelerisError(f"{root}: no file with {MIN_FILE_LINES} lines to complete")
    served = asyncio.run(_serve_sites(root, files, chosen, options or {}, invoked, lang.language_id))
    results = served.pop("results")
    return {**summarize(results), "package_files": len(files), **served, "results": results}


def run(
    packages: Sequence[tuple[str, str]] = PACKAGES,
    sites: int = 100,
    max_files: int = 4,
    seed: int = 0,
    options: dict | None = None,
    progress: Callable[[str], None] | None = None,
    invoked: bool = False,
    language: str = "python",
) -> dict:
    """The benchmark over ``packages`` (of ``language``): per package and overall figures, and every site
    (``invoked``: requests as a user makes them, with the server's alternatives)."""
    say = progress or (lambda message: None)
    started = time.perf_counter()
    per_package, everything, settings = {}, [], None
    for name, version in packages:
        say(f"{name} {version}: fetching")
        root = fetch_source(language, name, version)
        t0 = time.perf_counter()
        result = evaluate_folder(root, sites, max_files, f"{name}:{seed}", options, invoked, language)
        settings = result.pop("server_settings")
        result = {"version": version, **result, "seconds": round(time.perf_counter() - t0, 1)}
        per_package[name] = result
        everything += result["results"]
        say(
            f"{name}: {result['sites']} sites in {len(result['files_under_test'])} files, exact "
            f"{result['exact_match']:.1%}, edit {result['edit_similarity']:.3f} ({result['seconds']} s)"
        )
    return {
        "overall": summarize(everything),
        "packages": per_package,
        "language": language,
        "seed": seed,
        "sites_per_package": sites,
        "max_files": max_files,
        "options": options or {},
        "invoked": invoked,
        "server_settings": settings,
        "seconds": round(time.perf_counter() - started, 1),
    }


def without_sites(result: dict) -> dict:
    """The result less the per-site lists (for printing)."""
    out = dict(result)
    out["packages"] = {k: {x: y for x, y in v.items() if x != "results"} for k, v in result["packages"].items()}
    return out


def table(result: dict) -> str:
    rows = [(f"{name} {p['version']}", p) for name, p in result["packages"].items()]
    rows.append(("overall", result["overall"]))
    lines = [
        "| package | sites | exact | edit sim | empty | indent exact / edit | mid-line exact / edit | p50 ms "
        "| past deadline | right / wrong shown | right / wrong held back |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, p in rows:
        kinds = p["by_kind"]
        lines.append(
            f"| {label} | {p['sites']} | {p['exact_match']:.1%} | {p['edit_similarity']:.3f} | {p['empty_rate']:.1%} "
            f"| {kinds['indent'].get('exact_match', 0):.1%} / {kinds['indent'].get('edit_similarity', 0):.3f} "
            f"| {kinds['mid'].get('exact_match', 0):.1%} / {kinds['mid'].get('edit_similarity', 0):.3f} "
            f"| {p['latency_ms_p50']} | {p['over_budget'] or 0:.1%} | {p.get('right_shown', '?')} / "
            f"{p.get('wrong_shown', '?')} | {p.get('right_hidden', '?')} / {p.get('wrong_hidden', '?')} |"
        )
    if "exact_offered" in result["overall"]:  # invoked: one of the items exact, per package
        lines[0] += " one item exact |"
        lines[1] += "---|"
        for i, (_, p) in enumerate(rows, 2):
            lines[i] += f" {p['exact_offered']:.1%} |"
    return "\n".join(lines)
