"""Model catalog: every entry loads, names resolve, files import, errors name the field.

Parameter counts are checked against the "computed total" column of the reference INDEX.md
(copied verbatim to catalog/data/models/INDEX.md) within 0.5%.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from perfcast.catalog.files import DATA_DIR
from perfcast.catalog.hf_config import model_from_hf_config
from perfcast.catalog.models import MODELS_DIR, list_models, load_model, model_names
from perfcast.catalog.resolve import NameIndex, normalize_name, suggest
from perfcast.errors import InputError
from perfcast.graph.params import count_params
from perfcast.specs.model import ModelSpec
from perfcast.validate.vocabulary import VocabularyError
from perfcast.validate.vocabulary_names import read_model_name

GROUND_TRUTH = Path("/work/shared/ground_truth")


def _raw(slug: str) -> dict:
    return json.loads((MODELS_DIR / f"{slug}.json").read_text())


# ----- every entry -----------------------------------------------------------------------------

def test_catalog_has_every_reference_json() -> None:
    assert len(model_names()) == 48
    assert set(model_names()) == {p.stem for p in MODELS_DIR.glob("*.json")}


@pytest.mark.parametrize("slug", model_names())
def test_every_model_loads(slug: str) -> None:
    model = load_model(slug)
    assert isinstance(model, ModelSpec)
    assert model.name == slug
    assert model.published_params is not None and model.published_params > 1e8
    assert slug in model.source and len(model.source) > 40
    assert load_model(slug) is model  # cached


def test_list_models_matches_names() -> None:
    assert [m.name for m in list_models()] == model_names()


def _index_rows() -> dict[str, tuple[float, bool, float | None]]:
    """slug -> (computed total, embeddings excluded (dagger), computed active) from INDEX.md."""
    rows = {}
    for line in (MODELS_DIR / "INDEX.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 7 or not re.fullmatch(r"[a-z][a-z0-9.\-]+", cells[0]) or cells[0] == "slug":
            continue
        total = float(cells[4].split("B")[0])
        active = None if cells[5] in ("—", "-") else float(cells[5].rstrip("B"))
        rows[cells[0]] = (total * 1e9, "†" in cells[4], None if active is None else active * 1e9)
    return rows


INDEX_ROWS = _index_rows()


def test_index_covers_catalog() -> None:
    assert set(INDEX_ROWS) == set(model_names())


@pytest.mark.parametrize("slug", model_names())
def test_param_count_matches_index(slug: str) -> None:
    """count_params(total) = INDEX 'computed total' within 0.5%.

    Rows marked † in INDEX.md exclude the vocabulary embedding (the JSON has no vocab_size; the
    catalog fills one from the _notes), so the comparison drops V·h (and the untied head).
    """
    model = load_model(slug)
    counts = count_params(model)
    expected_total, no_vocab, expected_active = INDEX_ROWS[slug]
    total = counts.total
    if no_vocab:
        vocab = model.vocab_size * model.hidden_size
        total -= vocab if model.tie_word_embeddings else 2 * vocab
    assert total == pytest.approx(expected_total, rel=5e-3)
    if expected_active is not None:
        assert counts.active == pytest.approx(expected_active, rel=5e-3)


@pytest.mark.parametrize("slug", model_names())
def test_published_params_plausible(slug: str) -> None:
    """Published sizes are nominal ('1B' for 1.24B), so only unit slips are caught here."""
    model = load_model(slug)
    assert model.published_params is not None
    assert count_params(model).total == pytest.approx(model.published_params, rel=0.25)


# ----- names -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("spelling", "slug"),
    [
        ("llama-3.1-405b", "llama-3.1-405b"),
        ("llama3.1-405b", "llama-3.1-405b"),
        ("Llama-3.1-405B", "llama-3.1-405b"),
        ("meta-llama/Llama-3.1-405B", "llama-3.1-405b"),
        ("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
        ("meta-llama/Llama-2-7b-hf", "llama-2-7b"),
        ("llama-3-8b", "llama-3-8b"),
        ("llama3-8b", "llama-3-8b"),
        ("mixtral-8x7b-v0.1", "mixtral-8x7b"),
        ("mistralai/Mixtral-8x22B-v0.1", "mixtral-8x22b"),
        ("gpt-3-175b", "gpt3-175b"),
        ("gpt3-175b", "gpt3-175b"),
        ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
        ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
        # ground_truth/training.csv model column
        ("GPT 18.4B", "megatron-gpt-18.4b"),
        ("GPT 1008.0B", "megatron-gpt-1t"),
        ("GPT 1T", "megatron-gpt-1t"),
        ("GPT 174.6B", "gpt3-175b"),
        ("GPT 175B (GPT-3)", "gpt3-175b"),
        ("GPT3-175B", "gpt3-175b"),
        ("GPT-3 175B", "gpt3-175b"),
        ("GPT 530B (MT-NLG)", "megatron-gpt-529.6b"),
        ("Megatron-Turing NLG 530B", "megatron-gpt-529.6b"),
        ("LLAMA3-70B", "llama-3-70b"),
        ("Llama 3 70B", "llama-3-70b"),
        ("Llama3 70B", "llama-3-70b"),
        ("Llama3 8B", "llama-3-8b"),
        ("LLAMA3-405B", "llama-3.1-405b"),
        ("Llama 3.1 405B", "llama-3.1-405b"),
        ("LLAMA2-7B", "llama-2-7b"),
        ("Llama 2 13B", "llama-2-13b"),
        ("MPT-7B", "mpt-7b"),
        ("MPT-30b", "mpt-30b"),
        ("Mixtral 8x7B", "mixtral-8x7b"),
        ("Mixtral-8x22B", "mixtral-8x22b"),
        ("Nemotron-4 340B", "nemotron-4-340b"),
        ("Nemotron-340B", "nemotron-4-340b"),
        ("Nemotron-15B", "nemotron-4-15b"),
        ("DeepSeek V3 671B", "deepseek-v3"),
        ("DeepSeek-V3 671B (37B active)", "deepseek-v3"),
        ("Kimi K2", "kimi-k2"),
        ("Qwen3 MoE 30B", "qwen3-30b-a3b"),
        ("GPT-OSS 20B", "gpt-oss-20b"),
        ("OPT-175B", "opt-175b"),
        # ground_truth/inference.csv model column
        ("Falcon-180B", "falcon-180b"),
        ("GPT-J-6B", "gpt-j-6b"),
        ("Llama-2-70B", "llama-2-70b"),
        ("Llama-3.1-8B", "llama-3.1-8b"),
        ("GPT-175B (96 layers, 96 heads x 128)", "gpt3-175b"),
        ("Megatron-530B (105 layers, 128 heads x 160)", "megatron-gpt-529.6b"),
    ],
)
def test_alias_resolution(spelling: str, slug: str) -> None:
    assert load_model(spelling).name == slug


_FROM_ROW_COLUMNS = "no published config in ../shared/reference/models; rows carry the shape"
_NO_SHAPE = "no published architecture in ../shared/reference/models and none in the row"
UNRESOLVED_GROUND_TRUTH = {
    **{name: _FROM_ROW_COLUMNS for name in (
        "GPT 22B", "MPT-125m", "MPT-350m", "MPT-760m", "MPT-1b", "MPT-3b", "MPT-13b", "MPT-70b",
        "Llama 4 Scout (17B-16E)", "Llama 4 Scout 17B-16E, 2-layer proxy",
        "LLAMA4-Scout-LLM (17B-16E, text backbone)",
        "13B GPT-style (40 layers, d=5120, 40 heads, ffn 20480, vocab 50272 per llm-analysis "
        "test-13b config)",
        "GPT-1.3B (24 layers, 32 heads x 64)", "GPT-350M (24 layers, 16 heads x 64)",
        "GPT-6.7B (32 layers, 32 heads x 128)", "GPT-20B (44 layers, 48 heads x 128)",
        "GPT-89B (48 layers, 96 heads x 128)")},
    **{name: _NO_SHAPE for name in (
        "GPT3-5B", "GPT3-20B", "Gopher 280B", "PaLM 540B", "Nemotron-8B", "Nemotron-22B",
        "Nemotron V3 Nano 30B (26.02)", "Nemotron V3 Super 120B (26.02)",
        "Nemotron V3 Ultra 550B (26.04)")},
    "Qwen3-Next-80B-A3B": "hybrid Gated DeltaNet / attention layers: no operator model",
    "Llama-2-70B (verifier, INT4) + Llama-2-7B (draft, INT4)": "names two models (speculative "
    "decoding pair)",
}
"""Ground-truth model names with no catalog architecture, with the reason."""


def test_ground_truth_model_names_resolve() -> None:
    """Every model name of training.csv and inference.csv names a catalog model through the
    normalization layer (perfcast.validate.vocabulary_names), or is listed with its reason."""
    names = set()
    for file in ("training.csv", "inference.csv"):
        with (GROUND_TRUTH / file).open() as handle:
            names |= {row["model"] for row in csv.DictReader(handle)}
    for name in sorted(names - set(UNRESOLVED_GROUND_TRUTH)):
        found = read_model_name(name)
        assert found is not None and load_model(found.catalog).name == found.catalog, name
    for name in sorted(set(UNRESOLVED_GROUND_TRUTH) & names):
        with pytest.raises(VocabularyError):
            read_model_name(name)


def test_unknown_model_suggests() -> None:
    with pytest.raises(InputError) as info:
        load_model("llama-9-70b")
    assert info.value.field == "model"
    assert "unknown model; did you mean:" in str(info.value)
    assert "llama-3-70b" in str(info.value)


def test_normalize_name() -> None:
    assert normalize_name("meta-llama/Llama-3.1-405B") == "llama3.1405b"
    assert normalize_name("Llama 3.1 405B") == normalize_name("llama3.1-405b")
    assert normalize_name("H100_SXM") == "h100sxm"


def test_suggest_and_index_collisions() -> None:
    assert suggest("qwen3-8", ["qwen3-8b", "qwen3-32b", "llama-3-8b"], n=1) == ["qwen3-8b"]
    with pytest.raises(ValueError, match="names both"):
        NameIndex("model", {"a-1": ["x"], "b-1": ["X"]})


# ----- files -----------------------------------------------------------------------------------

def _hf_config(slug: str) -> dict:
    return {k: v for k, v in _raw(slug).items() if not k.startswith("_")}


def test_load_hf_config_path(tmp_path: Path) -> None:
    path = tmp_path / "my-llama" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_hf_config("llama-3.1-8b")))
    model = load_model(str(path))
    catalog = load_model("llama-3.1-8b")
    assert model.name == "my-llama"
    assert str(path) in model.source
    skip = {"name", "source", "published_params"}
    assert model.model_dump(exclude=skip) == catalog.model_dump(exclude=skip)
    assert load_model(path.parent).hidden_size == 4096  # a directory holding config.json


def test_load_modelspec_yaml_and_json(tmp_path: Path) -> None:
    fields = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
              "intermediate_size": 4096, "vocab_size": 32000, "activation": "gelu",
              "norm_type": "layernorm"}
    yaml_path = tmp_path / "tiny.yaml"
    yaml_path.write_text(yaml.safe_dump(fields))
    model = load_model(str(yaml_path))
    assert (model.name, model.hidden_size, model.activation) == ("tiny", 1024, "gelu")
    json_path = tmp_path / "tiny2.json"
    json_path.write_text(json.dumps({**fields, "name": "custom"}))
    assert load_model(str(json_path)).name == "custom"


def test_malformed_files(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    with pytest.raises(InputError, match="malformed json"):
        load_model(str(bad_json))
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("hidden_size: [1, 2\n")
    with pytest.raises(InputError, match="malformed yaml"):
        load_model(str(bad_yaml))
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    with pytest.raises(InputError, match="mapping"):
        load_model(str(listing))
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump({"hidden_size": 64, "num_hidden_layers": 2,
                                    "num_attention_heads": 4, "intermediate_size": 256,
                                    "vocab_size": 100, "hiden_size": 64}))
    with pytest.raises(InputError) as info:
        load_model(str(typo))
    assert info.value.field == "hiden_size"
    with pytest.raises(InputError, match="file not found"):
        load_model(str(tmp_path / "missing.json"))


def test_hf_config_missing_and_mistyped_fields(tmp_path: Path) -> None:
    config = _hf_config("llama-3-8b")
    del config["hidden_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(InputError) as info:
        load_model(str(path))
    assert (info.value.field, info.value.value) == ("hidden_size", None)
    assert "missing from config.json at" in str(info.value) and str(path) in str(info.value)

    config = {**_hf_config("llama-3-8b"), "num_attention_heads": "32"}
    with pytest.raises(InputError) as info:
        model_from_hf_config(config, "x", "test")
    assert (info.value.field, info.value.value) == ("num_attention_heads", "32")

    config = {**_hf_config("llama-3-8b"), "num_key_value_heads": 5}
    with pytest.raises(InputError, match="not a multiple"):
        model_from_hf_config(config, "x", "test")
    with pytest.raises(InputError):
        model_from_hf_config(["not", "a", "dict"], "x", "test")  # type: ignore[arg-type]


# ----- architecture mapping ----------------------------------------------------------------------

def test_family_facts() -> None:
    gpt = load_model("megatron-gpt-18.4b")
    assert (gpt.activation, gpt.norm_type, gpt.position_embedding) == (
        "gelu", "layernorm", "learned")
    assert gpt.attention_bias and gpt.mlp_bias and gpt.tie_word_embeddings
    assert (gpt.hidden_dropout, gpt.attention_dropout) == (0.1, 0.1)
    assert load_model("gpt3-175b").hidden_dropout == 0.1
    llama = load_model("llama-3.1-405b")
    assert (llama.activation, llama.norm_type, llama.hidden_dropout) == ("swiglu", "rmsnorm", 0.0)
    assert not llama.attention_bias and not llama.tie_word_embeddings
    assert llama.max_position_embeddings == 131072
    assert load_model("qwen2.5-7b").attention_bias and not load_model("qwen2.5-7b").mlp_bias
    assert load_model("qwen3-8b").qk_norm
    assert load_model("nemotron-4-340b").activation == "squared-relu"
    assert load_model("opt-175b").activation == "relu"


def test_gemma2_and_sliding_windows() -> None:
    gemma = load_model("gemma-2-9b")
    assert (gemma.activation, gemma.num_norms_per_layer, gemma.head_dim) == ("geglu", 4, 256)
    assert gemma.tie_word_embeddings
    assert (gemma.sliding_window, gemma.sliding_window_layers) == (4096, 21)
    mistral = load_model("mistral-7b-v0.1")
    assert (mistral.sliding_window, mistral.sliding_window_layers) == (4096, None)
    assert load_model("qwen2.5-7b").sliding_window is None  # use_sliding_window false
    assert load_model("mixtral-8x7b").sliding_window is None


def test_parallel_blocks_and_legacy_keys() -> None:
    gptj = load_model("gpt-j-6b")
    assert gptj.parallel_attention_mlp and gptj.norms_per_layer == 1
    assert (gptj.intermediate_size, gptj.max_position_embeddings) == (16384, 2048)
    assert not gptj.attention_bias and gptj.mlp_bias
    falcon = load_model("falcon-180b")
    assert falcon.parallel_attention_mlp and falcon.norms_per_layer == 2
    assert (falcon.num_kv_heads, falcon.intermediate_size) == (8, 4 * 14848)
    assert not falcon.attention_bias and falcon.tie_word_embeddings
    bloom = load_model("bloom-176b")
    assert (bloom.hidden_size, bloom.num_hidden_layers, bloom.position_embedding) == (
        14336, 70, "alibi")
    assert bloom.intermediate_size == 4 * 14336 and bloom.attention_bias
    mpt = load_model("mpt-7b")
    assert (mpt.position_embedding, mpt.intermediate_size, mpt.activation) == (
        "learned", 16384, "gelu")


def test_moe_and_mla() -> None:
    v3 = load_model("deepseek-v3")
    assert (v3.num_experts, v3.num_experts_per_tok, v3.num_shared_experts) == (256, 8, 1)
    assert (v3.first_k_dense_layers, v3.num_moe_layers, v3.moe_intermediate_size) == (3, 58, 2048)
    assert v3.is_mla and (v3.q_lora_rank, v3.kv_lora_rank, v3.v_head_dim) == (1536, 512, 128)
    assert v3.num_nextn_predict_layers == 1
    assert load_model("deepseek-v2-lite").q_lora_rank is None
    oss = load_model("gpt-oss-120b")
    assert (oss.num_experts, oss.num_experts_per_tok) == (128, 4)
    assert oss.attention_bias and oss.mlp_bias and oss.router_bias
    assert (oss.sliding_window, oss.sliding_window_layers) == (128, 18)
    mixtral = load_model("mixtral-8x7b")
    assert (mixtral.num_experts, mixtral.expert_intermediate_size) == (8, 14336)
    qwen = load_model("qwen3-235b-a22b")
    assert (qwen.num_experts, qwen.num_shared_experts, qwen.moe_layer_freq) == (128, 0, 1)


def test_catalog_fills_are_documented() -> None:
    index = yaml.safe_load((DATA_DIR / "models.yaml").read_text())["models"]
    for slug, row in index.items():
        if row.get("fill"):
            assert row.get("fill_source"), slug
            assert "filled" in load_model(slug).source
    assert load_model("gpt3-175b").vocab_size == 50257
