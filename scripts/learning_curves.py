"""Learning curves of a model lineage from its training logs and benchmark results.

A lineage is a chain of training runs, each continuing from the one before (`--segment` in order):
its train.log gives the training loss and the held-out validation against tokens, and the result
files measured on the model it wrote (`bench quality` for HumanEval-Infilling, `bench repo`) give
pass@1 and exact match at its end. Tokens are counted as batch x context per step, as the log's
`model:` line states them (the model card's counts add the canvas, a few percent more).

    .venv/bin/python scripts/learning_curves.py --out results/issue13/curves \\
        --segment gpu results/gpu_run/first/train.log results/gpu_run/first/humaneval-single.json ... \\
        --segment gpu results/gpu_run/continued/train.log ...
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

STEP = re.compile(r"^step (\d+)\s+[\d.]+% loss ([\d.]+)")
BATCH = re.compile(r"(\d+) x (\d+)")
EVAL = re.compile(r"^eval step (\d+): (\{.*\})")


def tokens_per_step(log: str) -> int:
    for line in log.splitlines():
        if line.startswith("model:") and "batch x context tokens:" in line:
            pairs = [int(b) * int(c) for b, c in BATCH.findall(line.split("batch x context tokens:")[1])]
            return round(sum(pairs) / len(pairs))
    raise SystemExit("no 'model:' line with batch x context tokens in the log")


def read_log(path: Path) -> dict:
    text = path.read_text()
    per_step = tokens_per_step(text)
    loss, evals, final = [], [], None
    for line in text.splitlines():
        if m := STEP.match(line):
            loss.append((int(m[1]), float(m[2])))
        elif m := EVAL.match(line):
            evals.append((int(m[1]), json.loads(m[2])["content_acc"]))
        elif line.startswith("final validation:"):
            final = json.loads(line.split(":", 1)[1])["content_acc"]
    if not loss:
        raise SystemExit(f"{path}: no step lines")
    return {"tokens_per_step": per_step, "loss": loss, "evals": evals, "final_content_acc": final}


def read_result(path: Path) -> tuple[str, float]:
    data = json.loads(path.read_text())
    if "pass@1" in data:
        return f"humaneval {data['set']} pass@1", data["pass@1"]
    if "overall" in data and "seed" in data:
        return f"bench repo seed {data['seed']} exact", data["overall"]["exact_match"]
    raise SystemExit(f"{path}: neither a bench quality nor a bench repo result")


def lineages(segments: list[list[str]]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for name, log, *results in segments:
        chain = out.setdefault(name, [])
        start = chain[-1]["end_tokens"] if chain else 0
        parsed = read_log(Path(log))
        per = parsed["tokens_per_step"]
        last_step = parsed["loss"][-1][0]
        chain.append({
            "log": log,
            "start_tokens": start,
            "end_tokens": start + last_step * per,
            "loss": [(start + s * per, v) for s, v in parsed["loss"]],
            "content_acc": [(start + s * per, v) for s, v in parsed["evals"]],
            "final_content_acc": parsed["final_content_acc"],
            "results": {label: value for label, value in map(read_result, map(Path, results))},
            "result_files": results,
        })
    return out


def table(data: dict[str, list[dict]]) -> str:
    labels = sorted({label for chain in data.values() for seg in chain for label in seg["results"]})
    head = ["lineage", "run (log)", "tokens at its end", "final loss", "held-out content_acc", *labels]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, chain in data.items():
        for seg in chain:
            cells = [
                name, seg["log"], f"{seg['end_tokens'] / 1e6:.1f}M", f"{seg['loss'][-1][1]:.3f}",
                "" if seg["final_content_acc"] is None else f"{seg['final_content_acc']:.3f}",
                *(f"{seg['results'][lab] * 100:.2f}%" if lab in seg["results"] else "" for lab in labels),
            ]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def plot(data: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(data), 2, figsize=(11, 3.6 * len(data)), squeeze=False)
    for row, (name, chain) in zip(axes, data.items()):
        loss_ax, score_ax = row
        for seg in chain:
            xs, ys = zip(*seg["loss"])
            loss_ax.plot([x / 1e6 for x in xs], ys, lw=0.8)
            loss_ax.axvline(seg["start_tokens"] / 1e6, color="grey", lw=0.4)
        loss_ax.set(title=f"{name}: training loss", xlabel="tokens (M)", ylabel="loss (ctx + span)")
        labels = sorted({lab for seg in chain for lab in seg["results"]})
        for lab in labels:
            pts = [(seg["end_tokens"] / 1e6, seg["results"][lab] * 100) for seg in chain if lab in seg["results"]]
            score_ax.plot(*zip(*pts), marker="o", label=lab)
        score_ax.set(title=f"{name}: at each run's end", xlabel="tokens (M)", ylabel="%")
        score_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segment", nargs="+", action="append", required=True, metavar="ARG",
                        help="LINEAGE TRAIN_LOG [RESULT_JSON ...], in training order")
    parser.add_argument("--out", type=Path, required=True, help="folder for curves.json, curves.md, curves.png")
    args = parser.parse_args()
    if any(len(seg) < 2 for seg in args.segment):
        parser.error("--segment needs a lineage name and a train.log")
    data = lineages(args.segment)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "curves.json").write_text(json.dumps(data, indent=1) + "\n")
    (args.out / "curves.md").write_text(table(data))
    plot(data, args.out / "curves.png")
    print(table(data), end="")


if __name__ == "__main__":
    main()
