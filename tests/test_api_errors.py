"""The Python API refuses bad input the way the CLI does: ``InputError`` (or pydantic's
``ValidationError`` from a spec), never a plain ValueError, ZeroDivisionError or overflow."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from perfcast import Strategy, Workload, estimate_training, load_model, load_system
from perfcast.errors import InputError
from perfcast.memory.estimate import estimate_memory

REACHED: list[int] = []
"""Examples that got as far as a training estimate (checked below: the sample is not all
rejected input)."""
MODELS = {name: load_model(name) for name in ("llama3-8b", "mixtral-8x7b")}
SMALL = st.sampled_from([1, 1, 2, 2, 4, 8])
SIZES = st.one_of(SMALL, SMALL, SMALL, st.sampled_from([3, 2**21, 2**40]))


@settings(max_examples=600, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(sorted(MODELS)), system=st.sampled_from(["dgx-h100", "dgx-a100"]),
       gpus=st.one_of(st.sampled_from([8, 16, 64]), SIZES), tp=SIZES, pp=SIZES, ep=SIZES,
       mbs=SIZES, gbs=st.one_of(st.sampled_from([64, 128, 256]), SIZES),
       seq=st.sampled_from([128, 2048, 4096, 4096, 1, 2**30]),
       precision=st.sampled_from(["bf16", "fp8"]),
       recompute=st.sampled_from(["none", "selective", "full"]),
       layers=st.sampled_from([None, 1, 100]),
       imbalance=st.sampled_from([1.0, 1.0, 2.0, 1e9, float("inf"), float("nan")]),
       capacity=st.sampled_from([None, None, 0.01, 1.0, float("nan")]),
       schedule=st.sampled_from([None, "1f1b", "zb-v", "dualpipe", "interleaved"]))
def test_estimates_raise_only_named_input_errors(model, system, gpus, tp, pp, ep, mbs, gbs, seq,
                                                 precision, recompute, layers, imbalance,
                                                 capacity, schedule):
    try:
        spec_system = load_system(system, num_gpus=min(gpus, 2**20))
        strategy = Strategy(num_gpus=gpus, tp=tp, pp=pp, ep=ep, micro_batch_size=mbs,
                            precision=precision, recompute=recompute,
                            recompute_num_layers=layers if recompute == "full" else None,
                            moe_load_imbalance=imbalance, moe_capacity_factor=capacity,
                            pipeline_schedule=schedule)
        workload = Workload(seq_length=seq, global_batch_size=gbs)
        memory = estimate_memory(MODELS[model], spec_system, strategy, workload)
        if gpus * seq <= 2**26:
            report = estimate_training(MODELS[model], spec_system, strategy, workload)
            assert report.step_time_s > 0 and 0 < report.mfu < 1
            REACHED.append(1)
        assert memory.peak_bytes > 0
    except (InputError, ValidationError):
        pass


def test_the_sample_reaches_estimates():
    test_estimates_raise_only_named_input_errors()
    assert len(REACHED) >= 20
