"""Property tests: more sharding never means more memory per GPU."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.memory.estimate import estimate_memory
from perfcast.specs import ModelSpec, Strategy, Workload

MODEL = ModelSpec(name="llama-like", hidden_size=4096, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
                  vocab_size=128256)

strategies = st.fixed_dictionaries({
    "tp": st.sampled_from([1, 2, 4, 8]),
    "pp": st.sampled_from([1, 2, 4]),
    "dp": st.sampled_from([1, 2, 4, 8]),
    "mbs": st.sampled_from([1, 2]),
    "recompute": st.sampled_from(["none", "selective", "full"]),
    "sp": st.booleans(),
})


def _peak(system, tp, pp, dp, mbs, recompute, sp, zero=0):
    strategy = Strategy(num_gpus=tp * pp * dp, tp=tp, pp=pp, micro_batch_size=mbs,
                        recompute=recompute, sequence_parallel=sp and tp > 1, zero_stage=zero)
    workload = Workload(seq_length=4096, global_batch_size=mbs * dp * 8)
    return estimate_memory(MODEL, system, strategy, workload).peak_bytes


@settings(max_examples=60, deadline=None)
@given(strategies, st.sampled_from([0, 1, 2]))
def test_higher_zero_stage_never_more_memory(a100_system, cfg, zero):
    lower = _peak(a100_system, cfg["tp"], cfg["pp"], cfg["dp"], cfg["mbs"], cfg["recompute"],
                  cfg["sp"], zero)
    higher = _peak(a100_system, cfg["tp"], cfg["pp"], cfg["dp"], cfg["mbs"], cfg["recompute"],
                   cfg["sp"], zero + 1)
    assert higher <= lower * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(strategies)
def test_more_tensor_parallel_never_more_memory(a100_system, cfg):
    if cfg["tp"] == 8:
        return
    base = _peak(a100_system, cfg["tp"], cfg["pp"], cfg["dp"], cfg["mbs"], cfg["recompute"],
                 True)
    doubled = _peak(a100_system, cfg["tp"] * 2, cfg["pp"], cfg["dp"], cfg["mbs"],
                    cfg["recompute"], True)
    assert doubled <= base * (1 + 1e-9)


@settings(max_examples=40, deadline=None)
@given(strategies)
def test_more_data_parallel_with_zero_never_more_memory(a100_system, cfg):
    base = _peak(a100_system, cfg["tp"], cfg["pp"], cfg["dp"], cfg["mbs"], cfg["recompute"],
                 cfg["sp"], zero=3)
    doubled = _peak(a100_system, cfg["tp"], cfg["pp"], cfg["dp"] * 2, cfg["mbs"],
                    cfg["recompute"], cfg["sp"], zero=3)
    assert doubled <= base * (1 + 1e-9)


@settings(max_examples=40, deadline=None)
@given(strategies)
def test_recompute_never_more_memory(a100_system, cfg):
    order = ["none", "selective", "full"]
    peaks = [_peak(a100_system, cfg["tp"], cfg["pp"], cfg["dp"], cfg["mbs"], r, cfg["sp"])
             for r in order]
    assert peaks[1] <= peaks[0] * (1 + 1e-9)
    assert peaks[2] <= peaks[1] * (1 + 1e-9)


def test_stage_totals_sum_parts(a100_system):
    strategy = Strategy(num_gpus=16, tp=2, pp=4, micro_batch_size=1)
    report = estimate_memory(MODEL, a100_system, strategy,
                             Workload(seq_length=4096, global_batch_size=64))
    for stage in report.stages:
        parts = (stage.weights_bytes + stage.grads_bytes + stage.optimizer_bytes
                 + stage.activations_bytes + stage.other_bytes)
        assert stage.total_bytes == parts
    assert sum(stage.num_layers for stage in report.stages) == MODEL.num_hidden_layers
    # 1F1B: the first stage holds the most micro-batches in flight.
    assert report.stages[0].inflight_micro_batches == 4
    assert report.stages[-1].inflight_micro_batches == 1


def test_does_not_fit_is_a_result(a100_system):
    big = MODEL.model_copy(update={"num_hidden_layers": 400})
    report = estimate_memory(big, a100_system, Strategy(num_gpus=1),
                             Workload(seq_length=4096, global_batch_size=1))
    assert report.fits is False
    assert report.to_dict()["fits"] is False
