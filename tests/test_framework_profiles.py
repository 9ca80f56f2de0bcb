"""Training framework profiles: data files, name/version resolution, the pure apply function,
``perfcast train/memory --framework``, and ``perfcast validate``'s use of the same profiles."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
from perfcast.catalog.frameworks import (
    TRAINING_FRAMEWORKS_DIR,
    SourcedValue,
    TrainingFrameworkProfile,
    framework_of_text,
    load_framework_profile,
    training_profiles,
)
from perfcast.cli.main import app
from perfcast.errors import InputError
from perfcast.validate.training_rows import ParsedRow, parse_row, read_rows

from conftest import shared_path

runner = CliRunner()
EXPECTED_PROFILES = {"megatron-lm", "megatron-core", "torchtitan", "llm-foundry", "deepspeed",
                     "pytorch-fsdp", "analytical"}
HOPPER_TP4 = RunFacts(tp=4, ep=1, precision="bf16", generation="hopper", layers_per_stage=20)


def _values(profile: TrainingFrameworkProfile) -> list[tuple[str, SourcedValue]]:
    return [(name, value) for name in TrainingFrameworkProfile.model_fields
            if isinstance(getattr(profile, name), tuple)
            for value in getattr(profile, name) if isinstance(value, SourcedValue)]


# ----- data files ------------------------------------------------------------------------------

def test_every_profile_loads_and_every_value_has_a_source():
    profiles = training_profiles()
    assert {p.name for p in profiles} == EXPECTED_PROFILES
    assert {path.stem for path in TRAINING_FRAMEWORKS_DIR.glob("*.yaml")} == EXPECTED_PROFILES
    for profile in profiles:
        values = _values(profile)
        assert len(values) >= 3, profile.name
        for setting, value in values:
            assert len(value.source) >= 20, (profile.name, setting)
        assert profile.recompute and profile.data_parallel_sharding and profile.flash_attention


def test_aliases_are_unique_across_profiles():
    names = [alias.name for p in training_profiles() for alias in p.aliases]
    assert len(names) == len(set(names))


def test_a_value_without_a_source_is_rejected():
    with pytest.raises(ValueError, match="source"):
        SourcedValue[bool](value=True, source="")


# ----- names and versions ----------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "profile", "parts"), [
    ("megatron-core@0.13", "megatron-core", {"mcore": (0, 13)}),
    ("Megatron-Core", "megatron-core", {}),
    ("NeMo 25.07", "megatron-core", {"nemo": (25, 7)}),
    ("nemo@25.09", "megatron-core", {"nemo": (25, 9)}),
    ("Megatron-Bridge", "megatron-core", {}),
    ("megatron-bridge@0.2.0", "megatron-core", {"bridge": (0, 2, 0)}),
    ("torchtitan", "torchtitan", {}),
    ("torchtitan@0.2.2", "torchtitan", {"torchtitan": (0, 2, 2)}),
    ("torchtitan@2024-08", "torchtitan", {"date": (2024, 8)}),
    ("NeMo AutoModel", "pytorch-fsdp", {}),
    ("pytorch-fsdp", "pytorch-fsdp", {}),
    ("llm-foundry", "llm-foundry", {}),
    ("Composer", "llm-foundry", {}),
    ("deepspeed", "deepspeed", {}),
    ("Megatron-LM", "megatron-lm", {}),
])
def test_names_and_aliases_resolve(spec, profile, parts):
    resolved = load_framework_profile(spec)
    assert resolved.profile.name == profile
    assert resolved.version.parts == parts


@pytest.mark.parametrize("spec", ["fairseq", "megatron", "nemo-x", "torchtitan@next"])
def test_unknown_framework_or_version_is_an_input_error(spec):
    with pytest.raises(InputError) as info:
        load_framework_profile(spec)
    assert info.value.field.startswith("framework")


@pytest.mark.parametrize(("text", "dated", "profile", "parts"), [
    ("NeMo 2.0 / Megatron-Core (NeMo 25.07 container)", "NeMo 25.07", "megatron-core",
     {"nemo": (25, 7)}),
    ("NeMo 1.x/Megatron-Core", "NeMo 24.07 (doc rev 2024-09)", "megatron-core",
     {"nemo": (24, 7), "date": (2024, 9)}),
    ("NeMo AutoModel (TE + DeepEP)", "", "pytorch-fsdp", {}),
    ("torchtitan 0.0.2 + torchao 0.10.0 (FSDP2)", "", "torchtitan", {"torchtitan": (0, 0, 2)}),
    ("Composer + llm-foundry (FlashAttention)", "2023-05", "llm-foundry", {"date": (2023, 5)}),
    ("Megatron-LM + DeepSpeed ZeRO-3", "2021", "megatron-lm", {"date": (2021,)}),
    ("Megatron-LM (2021)", "2021 (PyTorch 20.12 NGC container per run script)", "megatron-lm",
     {"date": (2021,)}),
])
def test_row_text_resolves_profile_and_release(text, dated, profile, parts):
    resolved = framework_of_text(text, dated)
    assert resolved is not None and resolved.profile.name == profile
    assert resolved.version.parts == parts


@pytest.mark.parametrize("text", ["metaseq (FSDP + Megatron-LM tensor parallelism)",
                                  "HAI-LLM (DualPipe)", "JAX + T5X (Pathways)", ""])
def test_row_text_of_other_frameworks_matches_no_profile(text):
    assert framework_of_text(text) is None


# ----- applying a profile ----------------------------------------------------------------------

def _apply(spec: str, facts: RunFacts = HOPPER_TP4, **explicit):
    return apply_framework_profile(load_framework_profile(spec), explicit, facts)


def test_megatron_core_recipe_defaults():
    applied = _apply("megatron-core")
    assert applied.fields == {
        "distributed_optimizer": True, "grad_reduce_dtype": "bf16", "sequence_parallel": True,
        "tp_comm_overlap": True, "recompute": "none", "flash_attention": True,
        "attention_kernel": "auto", "overlap_grad_reduce": True}
    for assumption in applied.assumptions:
        assert assumption.sentence.startswith("megatron-core") and assumption.source


def test_explicit_settings_are_never_overridden():
    applied = _apply("megatron-core", sequence_parallel=False, fsdp=True, grad_reduce_dtype="fp32")
    assert not {"sequence_parallel", "tp_comm_overlap", "distributed_optimizer",
                "grad_reduce_dtype"} & set(applied.fields)
    settings = {a.setting for a in applied.assumptions}
    assert not {"sequence_parallel", "tp_comm_overlap", "data_parallel_sharding"} & settings


def test_tp_dependent_defaults_need_tp():
    facts = RunFacts(tp=1, ep=8, precision="bf16", generation="hopper", layers_per_stage=20)
    fields = _apply("megatron-core", facts).fields
    assert "sequence_parallel" not in fields and "tp_comm_overlap" not in fields
    assert fields["etp"] == 1 and fields["moe_token_dispatcher"] == "alltoall"


@pytest.mark.parametrize(("spec", "forced"), [
    ("NeMo 25.02", True), ("NeMo 25.09", True), ("megatron-bridge@0.5", True),
    ("megatron-core@0.15", False), ("megatron-core", False), ("torchtitan", False),
])
def test_performance_scripts_benchmark_moe_with_balanced_routing(spec, forced):
    """NVIDIA's NeMo / Megatron-Bridge performance scripts force load balancing (frameworks.md
    2.4, 2.6); bare Megatron-Core and torchtitan keep the learned router."""
    facts = RunFacts(tp=1, ep=8, precision="bf16", generation="hopper", layers_per_stage=8)
    fields = _apply(spec, facts).fields
    assert fields.get("moe_router_force_load_balancing", False) is forced


def test_stated_routing_keeps_the_profile_routing_out():
    facts = RunFacts(tp=1, ep=8, precision="bf16", generation="hopper", layers_per_stage=8)
    for stated in ({"moe_load_imbalance": 1.2}, {"moe_capacity_factor": 1.0},
                   {"moe_router_force_load_balancing": False}):
        assert "moe_router_force_load_balancing" not in _apply("NeMo 25.02", facts,
                                                               **stated).fields
    no_ep = RunFacts(tp=1, ep=1, precision="bf16", generation="hopper", layers_per_stage=8)
    assert "moe_router_force_load_balancing" not in _apply("NeMo 25.02", no_ep).fields


@pytest.mark.parametrize(("spec", "recipe"), [
    ("NeMo 24.07", "delayed"), ("NeMo 25.07", "delayed"), ("NeMo 25.09", "tensorwise"),
    ("megatron-bridge", "tensorwise"), ("megatron-core@0.11", "delayed"),
    ("megatron-core@0.13", "delayed"), ("megatron-core@0.14", "tensorwise"),
    ("torchtitan@0.2.2", "tensorwise"),
    ("torchtitan@2024-08", "tensorwise"), ("torchtitan", "rowwise"),
    ("llm-foundry", "delayed"),
])
def test_bare_fp8_recipe_by_release(spec, recipe):
    facts = RunFacts(tp=1, ep=1, precision="fp8", generation="hopper", layers_per_stage=32)
    assert _apply(spec, facts).fields["fp8_recipe"] == recipe


def test_fp8_defaults_only_with_fp8():
    fields = _apply("torchtitan").fields
    assert "fp8_recipe" not in fields and "fp8_weight_cache" not in fields


def test_torchtitan_release_selects_activation_checkpointing():
    facts = RunFacts(tp=1, ep=1, precision="bf16", generation="hopper", layers_per_stage=32)
    assert _apply("torchtitan@0.2.2", facts).fields["recompute_num_layers"] == 16
    assert _apply("torchtitan@0.2.2", facts).fields["recompute"] == "full"
    assert _apply("torchtitan@2026-08", facts).fields["recompute"] == "selective"
    assert "recompute" not in _apply("torchtitan", facts, recompute="none").fields


@pytest.mark.parametrize(("generation", "kernel"), [
    ("ampere", "fa2"), ("hopper", "fa2"), ("blackwell", "auto"), ("blackwell-ultra", "auto"),
    ("cdna2", "triton"), ("cdna3", "triton"), ("cdna4", "triton"),
])
def test_torchtitan_sdpa_kernel_per_generation(generation, kernel):
    facts = RunFacts(tp=1, ep=1, precision="bf16", generation=generation, layers_per_stage=32)
    assert _apply("torchtitan", facts).fields["attention_kernel"] == kernel


def test_megatron_lm_2021_has_no_flash_attention_and_recomputes():
    fields = _apply("megatron-lm").fields
    assert fields["flash_attention"] is False and fields["recompute"] == "full"
    assert "attention_kernel" not in fields


# ----- command line ----------------------------------------------------------------------------

TRAIN = ["train", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "64", "--tp", "4",
         "--pp", "4", "--seq-length", "4096", "--global-batch-size", "64", "--json"]


def _json(args: list[str]) -> dict:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_train_framework_megatron_core_applies_and_lists_assumptions():
    data = _json(TRAIN + ["--framework", "megatron-core"])
    s = data["strategy"]
    assert s["sequence_parallel"] and s["tp_comm_overlap"] and s["distributed_optimizer"]
    assert s["grad_reduce_dtype"] == "bf16"
    assert data["framework"] == "megatron-core"
    framework = [a for a in data["framework_assumptions"]]
    assert any("sequence parallelism" in a["sentence"] for a in framework)
    assert all(a["source"] for a in framework)
    plain = _json(TRAIN)
    assert "framework_assumptions" not in plain and not plain["strategy"]["tp_comm_overlap"]
    # The estimator's own assumptions stay; each profile default adds one sentence with source.
    assert data["assumptions"][:len(plain["assumptions"])] == plain["assumptions"]
    added = data["assumptions"][len(plain["assumptions"]):]
    assert len(added) == len(framework) and all("[source: " in text for text in added)
    assert data["step_time_s"] != plain["step_time_s"]


def test_explicit_flags_override_the_framework():
    data = _json(TRAIN + ["--framework", "megatron-core", "--no-sequence-parallel",
                          "--grad-reduce-dtype", "fp32", "--recompute", "full"])
    s = data["strategy"]
    assert not s["sequence_parallel"] and not s["tp_comm_overlap"]
    assert s["grad_reduce_dtype"] == "fp32" and s["recompute"] == "full"
    settings = {a["setting"] for a in data["framework_assumptions"]}
    assert not {"sequence_parallel", "tp_comm_overlap", "grad_reduce_dtype", "recompute"} & settings
    # Giving the default value explicitly still counts as explicit.
    same = _json(TRAIN + ["--framework", "megatron-core", "--grad-reduce-dtype", "fp32"])
    assert same["strategy"]["grad_reduce_dtype"] == "fp32"


def test_train_framework_torchtitan_text_prints_assumptions():
    result = runner.invoke(app, ["train", "--model", "llama3-8b", "--system", "dgx-h100",
                                 "--gpus", "8", "--framework", "torchtitan@0.2.2", "--fp8"])
    assert result.exit_code == 0, result.output
    assert "Assumptions" in result.stdout
    assert "torchtitan@0.2.2: FSDP2 full sharding" in " ".join(result.stdout.split())
    data = _json(["train", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "8",
                  "--framework", "torchtitan@0.2.2", "--fp8", "--json"])
    s = data["strategy"]
    assert s["fsdp"] and s["attention_kernel"] == "fa2" and s["fp8_recipe"] == "tensorwise"
    assert s["recompute"] == "full" and s["recompute_num_layers"] == 16
    assert not s["fp8_weight_cache"]


def test_memory_framework_lists_assumptions():
    data = _json(["memory", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "8",
                  "--framework", "NeMo AutoModel", "--json"])
    assert data["framework"] == "pytorch-fsdp (nemo automodel)"
    assert any(a["setting"] == "data_parallel_sharding" for a in data["framework_assumptions"])
    assert any("full sharding" in text for text in data["assumptions"])


def test_unknown_framework_is_one_line_exit_2():
    result = runner.invoke(app, TRAIN + ["--framework", "fairseq"])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error: framework='fairseq'")
    assert len(result.output.strip().splitlines()) == 1


# ----- validate uses the same profiles ---------------------------------------------------------

def _rows() -> dict[str, dict[str, str | None]]:
    return {row["row_id"]: row for row in read_rows(shared_path("ground_truth", "training.csv"))}


def _strategy(row):
    result = parse_row(row)
    assert isinstance(result, ParsedRow), getattr(result, "reason", result)
    return result


def test_torchtitan_rows_on_blackwell_and_cdna3_are_forecast_with_sdpa_kernel():
    rows = _rows()
    # 532 B200, 538 GB200 (525-529 state a power cap without its value: skipped): cuDNN, the
    # generation's own kernel; 521-524 MI300X: ROCm SDPA's default AOTriton kernel
    for row_id, kernel in [("532", "auto"), ("538", "auto")] + [
            (str(i), "triton") for i in range(521, 525)]:
        parsed = _strategy(rows[row_id])
        assert parsed.strategy.attention_kernel == kernel
        assert any("SDPA" in note for note in parsed.notes)


def test_nemo_rows_take_the_megatron_core_profile():
    parsed = _strategy(_rows()["351"])  # NeMo 24.07, bare "fp8", TP 4
    s = parsed.strategy
    assert s.fp8_recipe == "delayed" and s.tp_comm_overlap and s.distributed_optimizer
    assert any(note.startswith("framework default: megatron-core") for note in parsed.notes)


def test_row_columns_override_the_profile():
    row = dict(_rows()["351"], sequence_parallel="no", precision="fp8 (per-tensor current scaling)")
    s = _strategy(row).strategy
    assert not s.sequence_parallel and not s.tp_comm_overlap and s.fp8_recipe == "tensorwise"


def test_flash_attention_flag_overrides_a_profile_without_it():
    args = ["train", "--model", "llama3-8b", "--system", "dgx-a100", "--gpus", "8", "--tp", "8",
            "--framework", "megatron-lm", "--json"]
    assert _json(args)["strategy"]["flash_attention"] is False
    forced = _json(args + ["--flash-attention"])
    assert forced["strategy"]["flash_attention"] is True
    assert "flash_attention" not in {a["setting"] for a in forced["framework_assumptions"]}


@pytest.mark.parametrize(("system", "kernel"), [("dgx-h100", "triton"), ("dgx-b200", "auto")])
def test_llm_foundry_triton_attention_only_where_it_ran(system, kernel):
    data = _json(["train", "--model", "llama3-8b", "--system", system, "--gpus", "8",
                  "--framework", "llm-foundry", "--json"])
    assert data["strategy"]["attention_kernel"] == kernel


def test_pipeline_micro_batches_come_from_the_profile_not_the_name():
    """A pipelined row that states no micro-batch size is split into pp·vpp micro-batches only
    where its framework profile says ``pipeline_microbatches: total_stages`` for its release
    (torchtitan before v0.1.0: ``num_total_stages``, 2 stages per rank for looped schedules);
    torchtitan from v0.1.0 (micro-batch size 1) and a Megatron row of the same shape keep one
    sequence per micro-batch."""
    from perfcast.validate.row_strategy import ParallelSizes, micro_batch

    single = ParallelSizes(num_gpus=512, tp=8, pp=4, vpp=1, cp=1, ep=1, dp=16)
    looped = ParallelSizes(num_gpus=512, tp=8, pp=4, vpp=2, cp=1, ep=1, dp=16)
    cases = [  # local batch 64 over 4 ranks
        ("torchtitan", "2024-10", single, 16), ("torchtitan", "2024-10", looped, 8),
        ("torchtitan", "2025-07", single, 1), ("Megatron-LM (2021)", "2024-10", single, 1),
    ]
    for framework, date, sizes, expected in cases:
        notes: list[str] = []
        row = {"framework": framework, "version_or_date": date}
        assert micro_batch(row, 1024, sizes, notes) == expected, (framework, date, sizes.vpp)
    titan = [p for p in training_profiles() if p.name == "torchtitan"][0]
    assert [v.value for v in titan.pipeline_microbatches] == ["total_stages", "one_sequence"]
    assert all(not p.pipeline_microbatches for p in training_profiles() if p.name != "torchtitan")
