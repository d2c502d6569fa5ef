"""bench adapt: the 80/20 split, the parts of a one-module package, and one short run (a few seconds of
adapting a tiny model, then both models through the real server) on a local toy package: no download."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from celeris_complete.bench.adapt import MIN_FILES, cut_into_parts, paired_interval, run, split_files
from celeris_complete.bench.repo_languages import python_files
from celeris_complete.cli import app
from celeris_complete.engine.confidence import CORE, FEATURES, FORMAT, PLACES, expand
from tests.test_bench_repo import CLASS, MODULES

# Twice bench repo's modules: enough text for the tiny model's adaptation to hold some out for its check.
TOY = {module: names + [n + "Two" for n in names] for module, names in MODULES.items()}


def toy_files(modules=TOY) -> dict[str, str]:
    files = {"things/__init__.py": ""}
    for module, names in modules.items():
        files[f"things/{module}"] = "# generated for the tests\n\n" + "".join(
            CLASS.format(name=n, word=module[:-3], n=i + 2) for i, n in enumerate(names)
        )
    return files


def test_split_is_seeded_holds_out_a_fifth_and_never_a_file_too_small_for_sites():
    many = toy_files({f"m{i}.py": ["Circle", "Square", "Triangle", "Hexagon"] for i in range(20)})
    adapt, held = split_files(many, seed=1)
    assert (adapt, held) == split_files(many, seed=1) and held != split_files(many, seed=2)[1]
    assert len(held) == 4 and sorted(adapt + held) == sorted(many) and not set(adapt) & set(held)
    assert "things/__init__.py" in adapt  # no room for sites: always in the adaptation's workspace
    assert len(split_files({"a.py": "x = 1\n", **toy_files()}, seed=0)[1]) == 1  # at least one, a usable one


def test_the_lift_interval_is_paired_over_sites():
    base = [{"similarity": x} for x in (0.1, 0.5, 0.9, 0.3)]
    better = [{"similarity": x["similarity"] + 0.2} for x in base]  # every site 0.2 better
    assert paired_interval(base, better) == [0.2, 0.2]  # the sites' spread does not widen a paired interval
    mixed = [{"similarity": x} for x in (0.3, 0.2, 1.0, 0.3)]  # +0.2, -0.3, +0.1, 0: a lift no site choice shows
    low, high = paired_interval(base, mixed)
    assert low < 0 < high
    with pytest.raises(ValueError):
        paired_interval(base, better[:3])  # unpaired


def test_a_single_module_is_cut_at_top_level_definitions():
    text = "import os\n\n" + "".join(CLASS.format(name=f"C{i}", word="w", n=i) for i in range(40))
    parts = cut_into_parts({"pkg/__init__.py": text}, part_lines=100)
    assert len(parts) >= MIN_FILES and all(name.startswith("pkg/__init__.part") for name in parts)
    assert "\n".join(parts.values()) == text  # nothing lost or repeated, in order
    assert all(p.startswith("import os") or p.startswith("class C") for p in parts.values())
    assert cut_into_parts({"tiny.py": "x = 1\n"}) == {"tiny.py": "x = 1\n"}


def test_short_run_adapts_on_the_workspace_and_compares_both_models_on_held_out_sites(
    tiny_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "things-src"
    for name, text in toy_files().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    # A calibration sure of nothing: the language server would hold back every answer of the base model.
    base_model = tmp_path / "tiny-sure-of-nothing"
    shutil.copytree(tiny_model_dir, base_model)
    width = len(expand({}))
    zeros, ones = [0.0] * width, [1.0] * width
    unsure = {"mean": zeros, "scale": ones, "weights": zeros, "bias": -10.0, "min_confidence": 0.5}
    spec = {"format": FORMAT, "features": list(FEATURES), "core": list(CORE), "places": dict.fromkeys(PLACES, unsure)}
    (base_model / "confidence.json").write_text(json.dumps(spec))
    result = run(
        [("things", "0")], minutes=0.05, model=str(base_model), sites=6, drafts_off=False,
        fetch=lambda name, version: root, recipe={"lr": 2e-3},
    )  # fmt: skip
    p = result["packages"]["things"]
    assert sorted(p["adapt_files"] + p["held_out_files"]) == sorted(python_files(root))
    assert len(p["held_out_files"]) == 1 and p["files_under_test"] == p["held_out_files"] and p["sites"] == 6
    # The adaptation: a model of its own under the cache, trained on the workspace's files only.
    adapted = p["adapt"]
    assert adapted["model"].startswith(str(tmp_path / "cache")) and adapted["steps"] > 0
    manifest = json.loads((Path(adapted["model"]) / "corpus_manifest.json").read_text())["files"]
    used = {r["path"].split("/", 1)[1] for r in manifest}
    assert used and used <= set(p["adapt_files"]) and not used & set(p["held_out_files"])
    assert {"base", "adapted"} <= set(adapted["check"])
    trained = json.loads((Path(adapted["model"]) / "config.json").read_text())["training"]
    assert trained["lr"] == result["lr"] == 2e-3  # --lr reached the adaptation
    # Evaluation: the server's workspace is the adaptation's (the held-out file gone), same sites for both.
    on = p["drafts_on"]
    assert on["workspace_files"] == sorted(p["adapt_files"]) and on["same_decoding"]
    assert on["server_settings"]["min_confidence"] == 0.0  # the models' answers, none held back as unsure
    assert any(r["got"] for r in on["results"]["base"]) and not any(r.get("hidden") for r in on["results"]["base"])
    base, adapted_sites = on["results"]["base"], on["results"]["adapted"]
    assert [(r["file"], r["line"], r["col"]) for r in base] == [(r["file"], r["line"], r["col"]) for r in adapted_sites]
    assert all(r["source"] == "model" for r in base + adapted_sites)
    for figure in ("exact_match", "edit_similarity"):
        assert on["lift"][figure] == pytest.approx(on["adapted"][figure] - on["base"][figure], abs=1e-4)
        assert result["overall"]["drafts_on"]["base"][figure] == on["base"][figure]
    assert "drafts_off" not in p and (root / p["held_out_files"][0]).is_file()  # the package is left alone


def test_cli_refuses_bad_choices_with_a_clear_message():
    runner = CliRunner()
    for args, message in (
        (["--packages", "nosuch"], "unknown package(s) nosuch"),
        (["--set", "drafts=false"], "bench adapt sets it itself"),
        (["--set", "min_confidence=0.2"], "bench adapt sets it itself"),
        (["--minutes", "0"], "--minutes and --lr above 0"),
        (["--lr", "-1e-4"], "--minutes and --lr above 0"),
    ):
        out = runner.invoke(app, ["bench", "adapt", *args])
        assert out.exit_code == 2 and message in out.output
