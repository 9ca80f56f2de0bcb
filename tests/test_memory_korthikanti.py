"""Activation memory equals Korthikanti et al. 2022 exactly; Figure 1 per-GPU memory.

Table 2 formulas (bytes per layer, 16-bit activations) and Figure 1 numbers as transcribed in
../shared/ground_truth/README.md (A100 80 GB, TP 8, seq 2048; first pipeline stage).
"""

from __future__ import annotations

import pytest

from perfcast.graph.params import count_params
from perfcast.memory import activations as A
from perfcast.memory.estimate import estimate_memory
from perfcast.specs import Strategy, Workload
from perfcast.units import GiB

from conftest import megatron_gpt

S, B, H, HEADS, T = 2048, 4, 6144, 64, 8
MODEL_22B = megatron_gpt("gpt-22b", 48, H, HEADS)


def _bytes(opts):
    return A.layer_activation_bytes(MODEL_22B, S, B, opts)


def test_table2_no_parallelism():
    got = _bytes(A.ActivationOptions(tp=1, flash_attention=False))
    assert got == pytest.approx(S * B * H * (34 + 5 * HEADS * S / H), rel=1e-12)


def test_table2_tensor_parallel():
    got = _bytes(A.ActivationOptions(tp=T, flash_attention=False))
    assert got == pytest.approx(S * B * H * (10 + 24 / T + 5 * HEADS * S / (H * T)), rel=1e-12)


def test_table2_tensor_and_sequence_parallel():
    got = _bytes(A.ActivationOptions(tp=T, sequence_parallel=True, flash_attention=False))
    assert got == pytest.approx(S * B * H / T * (34 + 5 * HEADS * S / H), rel=1e-12)


def test_table2_tensor_parallel_selective():
    got = _bytes(A.ActivationOptions(tp=T, recompute="selective", flash_attention=False))
    assert got == pytest.approx(S * B * H * (10 + 24 / T), rel=1e-12)


def test_table2_sequence_parallel_selective():
    opts = A.ActivationOptions(tp=T, sequence_parallel=True, recompute="selective",
                               flash_attention=False)
    assert _bytes(opts) == pytest.approx(S * B * H * 34 / T, rel=1e-12)


def test_table2_full_recompute():
    assert _bytes(A.ActivationOptions(tp=T, recompute="full")) == 2 * S * B * H


def test_flash_attention_removes_s_squared_term():
    flash = _bytes(A.ActivationOptions(tp=T, flash_attention=True))
    selective = _bytes(A.ActivationOptions(tp=T, recompute="selective", flash_attention=False))
    assert flash == pytest.approx(selective + 4 * HEADS * S * B / T)


# model, layers, hidden, heads, pp, vpp, micro-batch, GPUs; Figure 1 GiB:
# params+optimizer, activations no recompute, activations SP + selective.
FIGURE_1 = [
    ("22b", 48, 6144, 64, 1, 1, 4, 8, 45.56, 59.25, 9.56),
    ("175b", 96, 12288, 96, 8, 3, 1, 64, 45.56, 66.84, 12.35),
    ("530b", 105, 20480, 128, 35, 3, 1, 280, 31.64, 114.02, 23.08),
    ("1t", 128, 25600, 160, 64, 1, 1, 512, 32.96, 131.25, 26.56),
]


@pytest.mark.parametrize("case", FIGURE_1, ids=[c[0] for c in FIGURE_1])
def test_figure1_memory(case, a100_system):
    name, layers, hidden, heads, pp, vpp, mbs, gpus, states_gib, full_gib, spsel_gib = case
    model = megatron_gpt(name, layers, hidden, heads)
    for sp, recompute, expected in ((False, "none", full_gib), (True, "selective", spsel_gib)):
        strategy = Strategy(num_gpus=gpus, tp=8, pp=pp, vpp=vpp, micro_batch_size=mbs,
                            sequence_parallel=sp, recompute=recompute, flash_attention=False)
        workload = Workload(seq_length=2048, global_batch_size=mbs * 64 * strategy.dp)
        first = estimate_memory(model, a100_system, strategy, workload).stages[0]
        # Activations of the first stage's transformer layers: exact to the transcription.
        assert first.layer_activations_bytes / GiB == pytest.approx(expected, abs=0.006)
        # Parameters + gradients + optimizer of the layers (18 B/param, embedding excluded as
        # in the transcription), within 0.5%.
        layer_params = first.params - first.embedding_params
        states = (first.weights_bytes + first.grads_bytes + first.optimizer_bytes)
        assert layer_params * 18 / GiB == pytest.approx(states_gib, rel=0.005)
        assert states == pytest.approx(first.params * 18, rel=1e-9)


def test_more_params_than_layers_alone():
    model = megatron_gpt("gpt-22b", 48, 6144, 64)
    assert count_params(model).total > 48 * 12 * 6144**2
