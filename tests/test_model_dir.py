import json
import shutil

import pytest

from celeris_complete.errors import CelerisError
from celeris_complete.model.directory import load_model_dir


@pytest.fixture
def model_copy(tiny_model_dir, tmp_path):
    dst = tmp_path / "m"
    shutil.copytree(tiny_model_dir, dst, ignore=shutil.ignore_patterns(".work"))
    return dst


def test_loads(model_copy):
    assert load_model_dir(model_copy).model.num_parameters() > 0


def test_missing_directory(tmp_path):
    with pytest.raises(CelerisError, match="model directory not found"):
        load_model_dir(tmp_path / "nope")


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "model.safetensors"])
def test_missing_file_is_named(model_copy, name):
    (model_copy / name).unlink()
    with pytest.raises(CelerisError, match=name):
        load_model_dir(model_copy)


def test_corrupt_weights(model_copy):
    data = (model_copy / "model.safetensors").read_bytes()
    (model_copy / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CelerisError, match="model.safetensors: corrupt"):
        load_model_dir(model_copy)


def test_corrupt_config(model_copy):
    (model_copy / "config.json").write_text("{")
    with pytest.raises(CelerisError, match="config.json: not valid JSON"):
        load_model_dir(model_copy)
    (model_copy / "config.json").write_text('{"format": "something-else"}')
    with pytest.raises(CelerisError, match="not a celeris-complete model config"):
        load_model_dir(model_copy)


def test_mismatched_shapes(model_copy):
    cfg = json.loads((model_copy / "config.json").read_text())
    cfg["model"]["d_model"] = 64
    cfg["model"]["n_heads"] = 4
    (model_copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CelerisError, match="has shape"):
        load_model_dir(model_copy)


def test_mismatched_tokenizer(model_copy, small_tok):
    small_tok.save(model_copy / "tokenizer.json")  # 700 tokens, the model's has 600
    with pytest.raises(CelerisError, match="tokenizer.json: does not match"):
        load_model_dir(model_copy)


def test_unknown_model_key(model_copy):
    cfg = json.loads((model_copy / "config.json").read_text())
    cfg["model"]["n_experts"] = 8
    (model_copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CelerisError, match="n_experts"):
        load_model_dir(model_copy)
