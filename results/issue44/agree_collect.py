"""Experiment (not shipped): does sampled answers' agreement with the answer separate right from wrong?
Collects heldout sites like bench calibrate, plus per answer K samples' first lines."""

import json
import sys
import time
from dataclasses import asdict

import torch

import celeris_complete.engine.decode as decode
import celeris_complete.engine.pipeline as pipeline
from celeris_complete.bench import heldout
from celeris_complete.bench.repo import choose_sites, score, site_context
from celeris_complete.config import load_settings
from celeris_complete.drafts.snippets import SnippetIndex
from celeris_complete.engine import Engine, InfillRequest
from celeris_complete.model.directory import default_model_dir

K = int(sys.argv[2]) if len(sys.argv) > 2 else 6
out = sys.argv[1]
orig_init = decode.Decoding.__init__


def init(self, engine, req, plan, ctx, drafts, t0):
    orig_init(self, engine, req, plan, ctx, drafts, t0)
    if self.first is None and engine.supports.alternatives:
        self.first = []


decode.Decoding.__init__ = init
orig_answer = pipeline.answer
SAMPLE_MS = []


def answer(run, text, others, verdict, clock):
    c = orig_answer(run, text, others, verdict, clock)
    if run.first is not None and text.strip():
        t = time.perf_counter()
        with torch.inference_mode():
            samples = run.samples(K)
        SAMPLE_MS.append((time.perf_counter() - t) * 1000)
        c.features["_samples"] = samples
    return c


pipeline.answer = answer

engine = Engine(load_settings(dict(threads=1)))
model_dir = default_model_dir()
rows = []
t0 = time.time()
for name, root, held in heldout.heldout_sources(model_dir):
    files = heldout.workspace_files(root)
    index = SnippetIndex()
    for path, text in files.items():
        index.set_file(path, text)
    for path in held:
        if path not in files:
            continue
        fold = heldout.fold_of(name, path)
        chosen = choose_sites({path: files[path]}, 10, 1, "heldout:0", max_share=1.0)
        for site in chosen + heldout.blank_sites(path, files[path], 5, "heldout:0"):
            prefix, suffix = site_context(files[path], site)
            snippets = [s.text for s in index.query(heldout._snippet_query(prefix), exclude=path)]
            done = engine.complete(
                InfillRequest(
                    prefix,
                    suffix,
                    snippets=snippets,
                    lines=index.lines,
                    source=path,
                    language="python",
                    repair_samples=False,
                )
            )
            f = dict(done.features)
            samples = f.pop("_samples", [])
            rows.append(
                {
                    "source": name,
                    "fold": fold,
                    **asdict(site),
                    **score(site.expected, done.text),
                    "answer": done.text,
                    "draft": done.draft,
                    "syntax": done.syntax,
                    "features": f,
                    "samples": samples,
                    "confidence": done.confidence,
                }
            )
    print(
        f"{name}: {len(rows)} rows, {time.time() - t0:.0f}s, sample ms p50 "
        f"{sorted(SAMPLE_MS)[len(SAMPLE_MS) // 2] if SAMPLE_MS else 0:.1f}",
        flush=True,
    )
    json.dump({"sites": rows}, open(out, "w"))
