"""Public diffusion models through transformers, on tiny randomly initialised checkpoints.

No real checkpoint can be downloaded here, so each test builds one with transformers itself
(Qwen2-style for the Dream / Open-dCoder family, LLaMA-style for LLaDA) with a tokenizer that has a
mask token.  Their completions are meaningless; the tests check the mechanics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from celeris_complete.engine import InfillRequest
from tests.conftest import REPO, require

transformers = require("transformers")

from celeris_complete.backends import hf_model  # noqa: E402
from celeris_complete.backends.hf_model import HfDiffusionModel, detect_family, is_transformers_dir  # noqa: E402
from celeris_complete.config import load_settings  # noqa: E402
from celeris_complete.engine.pipeline import Engine  # noqa: E402
from celeris_complete.errors import CelerisError  # noqa: E402
from celeris_complete.model.diffusion import DecodeSettings, diffuse, span_tokens  # noqa: E402
from tests.lsp_session import Session, run  # noqa: E402

WORDS = (
    "def return import from class if else for in while print self None True False add sub total "
    "value result items name path os sys len range a b c x y ( ) [ ] : , . = + - * / 0 1 2"
).split()
SPECIALS = ["<|endoftext|>", "<|mask|>", "<unk>", "<|startoftext|>", "<|pad|>"]
EOS, MASK, UNK, BOS, PAD = range(5)
VOCAB = 64  # > the tokenizer's size: the rows beyond it are never a token
PREFIX = "import os\n\ndef add(a, b):\n    total = a + b\n    return "
SUFFIX = "\n\nprint(add(1, 2))\n"


def save_tokenizer(out: Path) -> None:
    """A word-level tokenizer: every non-special token is a word, so any span decodes to visible text."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        mask_token="<|mask|>",
        unk_token="<unk>",
        bos_token="<|startoftext|>",
        pad_token="<|pad|>",
    )
    fast.save_pretrained(out)


def make_checkpoint(out: Path, arch: str = "qwen2", seed: int = 0, **config_fields) -> Path:
    """A tiny random checkpoint saved by transformers, its config.json then given ``config_fields``."""
    torch.manual_seed(seed)
    common = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=EOS,
        pad_token_id=PAD,
        bos_token_id=BOS,
    )
    if arch == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    save_tokenizer(out)
    config = json.loads((out / "config.json").read_text())
    config.update(config_fields)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


@pytest.fixture(scope="module")
def dream_dir(tmp_path_factory) -> Path:
    """Dream's config names (model_type "Dream") on a Qwen2 architecture transformers has natively."""
    return make_checkpoint(tmp_path_factory.mktemp("dream"), "qwen2", model_type="Dream")


@pytest.fixture(scope="module")
def llada_dir(tmp_path_factory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("llada"), "llama", model_type="llada", mask_token_id=MASK)


@pytest.fixture(scope="module")
def dream(dream_dir) -> HfDiffusionModel:
    return HfDiffusionModel(dream_dir)


@pytest.fixture(scope="module")
def llada(llada_dir) -> HfDiffusionModel:
    return HfDiffusionModel(llada_dir)


def settings(model_dir, **overrides):
    return load_settings({"model": str(model_dir), **overrides}, environ={}, user_file=Path("/nonexistent"))


def full_forward(adapter: HfDiffusionModel, seq: torch.Tensor) -> torch.Tensor:
    """The model's logits over the whole natural-order sequence, with full attention."""
    n = seq.shape[1]
    mask = torch.zeros(seq.shape[0], 1, n, n)
    with torch.no_grad():
        return adapter.model(input_ids=seq, attention_mask=mask).logits.float()


def canvas_of(adapter, n=6, seed=1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(len(SPECIALS), len(SPECIALS) + len(WORDS), (1, n), generator=g)
    x[0, ::2] = adapter.ids.mask
    return x


# ---- recognising a model directory ------------------------------------------------------------------
def test_family_detection():
    assert detect_family({"model_type": "Dream", "architectures": ["DreamModel"]}).name == "dream"
    assert detect_family({"model_type": "llada", "architectures": ["LLaDAModelLM"]}).name == "llada"
    assert detect_family({"model_type": "CoDA", "architectures": ["CoDALanguageModel"]}).name == "coda"
    assert detect_family({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}).name == "open-dcoder"
    shifted = {name: f.shifted for name, f in hf_model.FAMILIES.items()}
    assert shifted == {"dream": True, "open-dcoder": True, "coda": True, "llada": False}
    with pytest.raises(CelerisError, match="'llama'.*not a supported masked-diffusion family"):
        detect_family({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    assert hf_model.needs_remote_code({"architectures": ["DreamModel"], "auto_map": {}})
    assert not hf_model.needs_remote_code({"architectures": ["Qwen2ForCausalLM"], "auto_map": {"AutoModel": "m.M"}})


def test_which_directories_are_transformers_models(dream_dir, shipped_model_dir, tmp_path):
    assert is_transformers_dir(dream_dir)
    assert not is_transformers_dir(shipped_model_dir)  # our own format
    assert not is_transformers_dir(tmp_path / "missing")


def test_mask_id_comes_from_config_then_tokenizer_then_known_id():
    family = hf_model.FAMILIES["dream"]
    tok = SimpleNamespace(mask_token_id=7)
    assert hf_model.resolve_mask_id(family, {"mask_token_id": 3}, tok) == 3
    assert hf_model.resolve_mask_id(family, {}, tok) == 7
    assert hf_model.resolve_mask_id(family, {}, SimpleNamespace(mask_token_id=None)) == 151666
    assert hf_model.resolve_mask_id(hf_model.FAMILIES["llada"], {}, SimpleNamespace()) == 126336
    with pytest.raises(CelerisError, match="no mask token"):
        hf_model.resolve_mask_id(hf_model.FAMILIES["open-dcoder"], {}, SimpleNamespace(mask_token_id=None))


def test_special_ids_of_a_loaded_model(dream, llada):
    for adapter in (dream, llada):
        assert adapter.ids.mask == MASK and adapter.ids.eos == EOS
        assert adapter.end_ids == [EOS, PAD]  # config eos first: it fills unused slots
        banned = set(adapter.ids.banned)
        assert {MASK, UNK, BOS} <= banned and EOS not in banned and PAD not in banned
        assert set(range(len(SPECIALS) + len(WORDS), VOCAB)) <= banned  # embedding rows with no token


# ---- layout, shift, attention -----------------------------------------------------------------------
def test_layout_of_each_family(dream, llada):
    d = dream.context("a = b", "print ( a )", 64, 64)
    pre, suf = dream.tok.encode("a = b"), dream.tok.encode("print ( a )")
    assert d.tokens == pre + suf and d.prefix_tokens == len(pre)
    l_ctx = llada.context("a = b", "print ( a )", 64, 64)
    assert l_ctx.tokens == [BOS] + pre + suf and l_ctx.prefix_tokens == len(pre) + 1  # LLaDA starts with BOS
    empty = dream.context("", "x", 64, 64)
    assert empty.tokens[0] == EOS and empty.prefix_tokens == 1  # a shifted family needs a position before slot 0
    x = canvas_of(dream, 4)
    seq = dream.layout(x, dream.begin(d))
    assert seq[0].tolist() == pre + x[0].tolist() + suf


def test_windows_keep_the_tokens_nearest_the_cursor(dream):
    ctx = dream.context("a " * 500 + "x y", "b c " + "d " * 500, 10, 4)
    assert ctx.prefix_tokens == 10 and ctx.tokens[8:10] == dream.tok.encode("x y")
    assert ctx.tokens[10:] == dream.tok.encode("b c d d")


@pytest.mark.parametrize("which, shift", [("dream", 1), ("llada", 0)])
@pytest.mark.parametrize("dual_cache", [False, True])
def test_slot_logits_come_from_the_right_position(request, which, shift, dual_cache):
    adapter = request.getfixturevalue(which)
    adapter.dual_cache = dual_cache
    try:
        ctx = adapter.context(PREFIX, SUFFIX, 64, 64)
        state = adapter.begin(ctx)
        x = canvas_of(adapter)
        got = adapter.span_step(x, state)
        raw = full_forward(adapter, adapter.layout(x, state))
        p, c = ctx.prefix_tokens, x.shape[1]
        expected = raw[:, p - shift : p - shift + c].clone()
        expected[..., EOS] = torch.logsumexp(expected[..., [EOS, PAD]], dim=-1)  # end tokens merged
        assert torch.allclose(got, expected, atol=1e-4)
        other = raw[:, p - (1 - shift) : p - (1 - shift) + c]
        assert not torch.allclose(got[..., 5:], other[..., 5:], atol=1e-2)  # the other alignment is wrong
        again = adapter.span_step(x, state)  # a second step (from the dual cache when on) with the same canvas
        assert torch.allclose(again, expected, atol=1e-4)
    finally:
        adapter.dual_cache = True


@pytest.mark.parametrize("which", ["dream", "llada"])
def test_attention_is_bidirectional(request, which):
    adapter = request.getfixturevalue(which)
    ctx = adapter.context(PREFIX, SUFFIX, 64, 64)
    x = canvas_of(adapter)
    first = adapter.span_step(x, adapter.begin(ctx))
    changed = list(ctx.tokens)
    changed[-1] = changed[-1] + 1 if changed[-1] != len(SPECIALS) + len(WORDS) - 1 else len(SPECIALS)
    later = adapter.span_step(x, adapter.begin(ctx.__class__(changed, ctx.prefix_tokens, ctx.suffix_tokens)))
    assert not torch.allclose(first[:, 0], later[:, 0], atol=1e-6), "slot 0 must see the last suffix token"
    # The same model without our full attention mask is causal: there, the change is invisible.
    seq = adapter.layout(x, adapter.begin(ctx))
    seq2 = seq.clone()
    seq2[0, -1] = changed[-1]
    with torch.no_grad():
        a, b = adapter.model(input_ids=seq).logits, adapter.model(input_ids=seq2).logits
    assert torch.allclose(a[:, : seq.shape[1] - 1], b[:, : seq.shape[1] - 1])


def test_unused_slots_end_the_span(dream):
    """Once end-of-span is committed at slot j, the span is slots 0..j-1, whatever the model says later."""

    class EndsAtThree:
        def span_step(self, x, state):
            logits = dream.span_step(x, state)
            logits[:, :3, EOS] -= 100.0
            logits[:, 3:, EOS] += 100.0
            return logits

    state = dream.begin(dream.context(PREFIX, SUFFIX, 64, 64))
    out, _ = diffuse(EndsAtThree(), state, 8, dream.ids, DecodeSettings(steps=2))
    assert out[0, 3:].tolist() == [EOS] * 5 and MASK not in out[0].tolist()
    span = span_tokens(out[0], EOS)
    assert len(span) == 3 and dream.tok.decode(span) == " ".join(WORDS[i - len(SPECIALS)] for i in span)


# ---- the dual cache ---------------------------------------------------------------------------------
def test_dual_cache_on_and_off(dream_dir):
    engine = Engine(settings(dream_dir, eos_penalty=20.0))
    results = {}
    for on in (False, True):
        engine.model.dual_cache = on
        one = engine.complete(InfillRequest(PREFIX, SUFFIX, mode="block", max_tokens=12, steps=1))
        four = engine.complete(InfillRequest(PREFIX, SUFFIX, mode="block", max_tokens=12, steps=4, threshold=1.0))
        assert four.steps == 4 and four.tokens == 12
        results[on] = (one.raw, four.raw)
    assert results[True][0] == results[False][0], "one step is a full pass: the cache cannot change it"


# ---- loading: refusals, precision -------------------------------------------------------------------
def test_remote_code_is_refused_without_the_flag(tmp_path):
    out = make_checkpoint(
        tmp_path / "remote",
        model_type="Dream",
        architectures=["DreamModel"],
        auto_map={"AutoConfig": "configuration_dream.DreamConfig", "AutoModel": "modeling_dream.DreamModel"},
    )
    marker = tmp_path / "code-ran"
    (out / "modeling_dream.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    with pytest.raises(CelerisError) as err:
        Engine(settings(out))
    message = str(err.value)
    assert "--trust-remote-code" in message and f"runs code from {out}" in message
    assert "modeling_dream.py" in message and not marker.exists()


def test_missing_directory_and_hub_names_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("apple/DiffuCoder-7B-Base", str(tmp_path / "nothing")):
        with pytest.raises(CelerisError, match="model directory not found.*nothing is downloaded"):
            Engine(settings(name))
    with pytest.raises(CelerisError, match="missing or not valid JSON"):
        HfDiffusionModel(tmp_path / "nothing")


def test_a_model_too_big_for_memory_is_refused_before_loading(dream_dir, monkeypatch):
    monkeypatch.setattr(hf_model, "available_memory", lambda device: 100_000)
    monkeypatch.setattr(HfDiffusionModel, "_load", lambda *a, **k: pytest.fail("loaded a model that cannot fit"))
    params = hf_model.safetensors_parameters(dream_dir)
    assert params == sum(p.numel() for p in transformers.Qwen2ForCausalLM.from_pretrained(dream_dir).parameters())
    with pytest.raises(CelerisError, match=r"needs about 0\.\d GiB in fp32 on cpu, but only 0\.0 GiB of RAM"):
        HfDiffusionModel(dream_dir)


def test_pickled_weights_are_never_loaded(tmp_path):
    out = make_checkpoint(tmp_path / "bin", model_type="Dream")
    (out / "model.safetensors").rename(out / "pytorch_model.bin")
    with pytest.raises(CelerisError, match="no \\*.safetensors weights .*pytorch_model.bin"):
        HfDiffusionModel(out)


def test_int8_on_the_cpu(dream_dir):
    engine = Engine(settings(dream_dir, quant="int8", eos_penalty=20.0))
    linear = [m for m in engine.model.model.modules() if isinstance(m, torch.nn.Linear)]
    quantized = [m for m in engine.model.model.modules() if "quantized" in type(m).__module__]
    assert not linear and quantized
    done = engine.complete(InfillRequest(PREFIX, SUFFIX, mode="block", max_tokens=8))
    assert done.tokens == 8 and done.text.strip()
    with pytest.raises(CelerisError, match="fp16 needs a CUDA device"):
        Engine(settings(dream_dir, quant="fp16", device="cpu"))


# ---- the whole path: engine, CLI, language server ---------------------------------------------------
@pytest.mark.parametrize("which", ["dream_dir", "llada_dir"])
def test_engine_completes(request, which):
    engine = Engine(settings(request.getfixturevalue(which), eos_penalty=20.0))
    misses = engine.cache.stats.misses
    done = engine.complete(InfillRequest(PREFIX, SUFFIX, mode="line", max_tokens=6, snippets=["def sub(a, b): ..."]))
    assert done.tokens == 6 and done.cache == "miss" and engine.cache.stats.misses == misses + 1
    assert done.text.strip() and "\n" not in done.text and done.snippet_tokens == 0
    assert set(done.raw.split()) <= set(WORDS)
    again = engine.complete(InfillRequest(PREFIX, SUFFIX, mode="line", max_tokens=6))
    assert again.raw == done.raw, "greedy decoding is deterministic"
    # Alternatives: a batch of sampled canvases on the same context; the answer stays what it was.
    invoked = engine.complete(InfillRequest(PREFIX, SUFFIX, mode="line", max_tokens=6, alternatives=3))
    assert invoked.raw == done.raw and len(invoked.alternatives) == 2
    assert all(set(t.split()) <= set(WORDS) for t in invoked.alternatives), invoked.alternatives


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "celeris_complete.cli", *map(str, args)],
        capture_output=True,
        cwd=REPO,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **(env or {})},
    )


def test_cli_infill(llada_dir, tmp_path):
    src = tmp_path / "a.txt"  # not Python: the compiler's check would withhold a random model's answer
    src.write_text("def add(a, b):\n    return <FILL>\n")
    r = cli("infill", f"{src}:2:12", "--model", llada_dir, "--json", "--max-tokens", "5", "--eos-penalty", "20")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["tokens"] == 5 and data["completion"].strip()


REMOTE_CONFIG = """
from transformers import Qwen2Config


class TinyDreamConfig(Qwen2Config):
    model_type = "Dream"
"""
REMOTE_MODEL = """
import torch
from transformers import Qwen2ForCausalLM

from .configuration_tinydream import TinyDreamConfig


class TinyDreamModel(Qwen2ForCausalLM):
    config_class = TinyDreamConfig

    def forward(self, input_ids=None, **kwargs):  # bidirectional by itself, as Dream's own code is
        n = input_ids.shape[1]
        full = torch.zeros(input_ids.shape[0], 1, n, n, dtype=self.dtype, device=input_ids.device)
        return super().forward(input_ids=input_ids, attention_mask=full)
"""
REMOTE_CHECK = """
import sys, torch
from celeris_complete.backends.hf_model import HfDiffusionModel
m = HfDiffusionModel(sys.argv[1], trust_remote_code=True)
assert m.remote and not m.dual_cache and type(m.model).__name__ == "TinyDreamModel"
ctx = m.context("a = b", "print ( a )", 64, 64)
x = torch.tensor([[m.ids.mask, 10, m.ids.mask]])
got = m.span_step(x, m.begin(ctx))
n = ctx.prefix_tokens
seq = m.layout(x, m.begin(ctx))
raw = m.model(input_ids=seq).logits.float()[:, n - 1 : n + 2]
raw[..., m.ids.eos] = torch.logsumexp(raw[..., m.end_ids], dim=-1)
assert torch.allclose(got, raw, atol=1e-5)
print("remote ok")
"""


def test_remote_code_runs_with_the_flag(tmp_path):
    out = make_checkpoint(
        tmp_path / "remote",
        model_type="Dream",
        architectures=["TinyDreamModel"],
        auto_map={
            "AutoConfig": "configuration_tinydream.TinyDreamConfig",
            "AutoModel": "modeling_tinydream.TinyDreamModel",
        },
    )
    (out / "configuration_tinydream.py").write_text(textwrap.dedent(REMOTE_CONFIG))
    (out / "modeling_tinydream.py").write_text(textwrap.dedent(REMOTE_MODEL))
    env = {"HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HOME": str(tmp_path / "hf")}
    src = tmp_path / "a.py"
    src.write_text("x = <FILL>\n")
    refused = cli("infill", src, "--model", out, env=env)
    assert refused.returncode == 2 and b"pass --trust-remote-code" in refused.stderr
    r = cli("infill", src, "--model", out, "--trust-remote-code", "--json", "--eos-penalty", "20", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["holes"][0]["tokens"] > 0
    check = subprocess.run(
        [sys.executable, "-c", REMOTE_CHECK, str(out)],
        capture_output=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, **env},
    )
    assert check.returncode == 0 and b"remote ok" in check.stdout, check.stderr.decode()[-2000:]


def field(obj, name):
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def test_language_server_with_a_transformers_model(dream_dir):
    uri = "file:///project/app.py"

    async def scenario():
        # A random model's text is not Python: the compiler's check (tested on its own) would withhold it.
        s = Session(dream_dir, init_options={"eos_penalty": 20.0, "mode": "line", "syntax_candidates": 0})
        await s.start()
        status = await s.status()
        assert field(status, "model_loaded") and not field(status, "error"), status
        s.open(uri, PREFIX + SUFFIX)
        result = await s.inline(uri, 4, 11, invoked=True)
        assert result.items and all(item.insert_text.strip() for item in result.items)
        assert any(field(t, "source") == "model" and field(t, "cache") == "miss" for t in s.timings)
        await s.stop()

    run(scenario())
