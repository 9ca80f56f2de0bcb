"""Device time per kernel boundary of a replayed graph (calibration/graph_replay.yaml) in the
engine-simulated decode step (estimate.inference_phases, estimate.serving)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from perfcast.calibration.bundle import load_calibration
from perfcast.calibration.graph_replay import load_graph_replay
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.errors import InputError
from perfcast.estimate.inference_ops import AttentionPass
from perfcast.estimate.inference_phases import layer_kernel_count, step_time
from perfcast.estimate.serving import estimate_serving, serving_setup
from perfcast.specs.serving import ServingWorkload
from perfcast.specs.strategy import Strategy


def _ctx(system: str = "dgx-h100", model: str = "llama-3.1-8b", tp: int = 1):
    return serving_setup(load_model(model), load_system(system, num_gpus=tp),
                         Strategy(num_gpus=tp, tp=tp)).ctx


def test_shipped_file_has_a_fitted_gap_per_vendor():
    calibration = load_graph_replay()
    for vendor in ("nvidia", "amd"):
        entry = calibration.vendors[vendor]
        assert 0 < entry.kernel_gap_s < 10e-6
        assert entry.fit_rows >= 30
        low, high = entry.loso_range_s
        assert low <= entry.kernel_gap_s <= high
    assert calibration.kernel_gap_s("google") == 0.0


def test_the_serving_context_takes_its_vendors_gap():
    calibration = load_graph_replay()
    assert _ctx("dgx-h100").graph_kernel_gap_s == calibration.kernel_gap_s("nvidia")
    assert _ctx("mi300x-8").graph_kernel_gap_s == calibration.kernel_gap_s("amd")


@pytest.mark.parametrize("model, tp", [("llama-3.1-8b", 1), ("llama-3.1-70b", 4),
                                       ("deepseek-v3", 8)])
def test_a_graphed_decode_step_pays_the_gap_once_per_kernel(model, tp):
    base = replace(_ctx(model=model, tp=tp), cuda_graphs=True)
    passes = (AttentionPass(8.0, 1, 2048.0, causal=False),)
    no_gap = step_time(replace(base, graph_kernel_gap_s=0.0), 8.0, passes, 8.0)
    gap = step_time(replace(base, graph_kernel_gap_s=1e-6), 8.0, passes, 8.0)
    m = base.model
    from perfcast.graph.param_sharding import is_moe_layer

    kernels = sum(layer_kernel_count(base, 8.0, passes, is_moe_layer(m, layer))
                  for layer in range(m.num_hidden_layers))
    assert kernels >= 8 * m.num_hidden_layers
    assert float(gap.total_s - no_gap.total_s) == pytest.approx(kernels * 1e-6, rel=1e-9)
    assert float(gap.overhead_s - no_gap.overhead_s) == pytest.approx(kernels * 1e-6, rel=1e-9)


def test_eager_and_prefill_steps_pay_no_gap():
    base = _ctx()
    passes = (AttentionPass(8.0, 1, 2048.0, causal=False),)
    for ctx, prefill in ((replace(base, cuda_graphs=False), False),
                         (replace(base, cuda_graphs=True), True)):
        a = step_time(replace(ctx, graph_kernel_gap_s=0.0), 8.0, passes, 8.0, prefill=prefill)
        b = step_time(replace(ctx, graph_kernel_gap_s=5e-6), 8.0, passes, 8.0, prefill=prefill)
        assert float(a.total_s) == float(b.total_s)


def test_tpot_rises_with_the_gap_and_the_amd_gap_is_the_larger():
    """Same model and concurrency: a larger gap never makes decode faster."""
    workload = ServingWorkload(mode="concurrency", input_len=1024, output_len=256,
                               concurrency=8, num_requests=64)
    calibration = load_graph_replay()
    tpot = []
    for gap in (0.0, 1e-6, 3e-6):
        entry = calibration.vendors["nvidia"].model_copy(update={"kernel_gap_s": gap})
        trial = calibration.model_copy(update={"vendors": {"nvidia": entry}})
        report = estimate_serving(load_model("llama-3.1-8b"), load_system("dgx-h100", num_gpus=1),
                                  Strategy(num_gpus=1), workload,
                                  calibration=load_calibration().replace(graph_replay=trial))
        tpot.append(report.tpot.mean_s)
    assert tpot[0] < tpot[1] < tpot[2]
    assert calibration.kernel_gap_s("amd") > calibration.kernel_gap_s("nvidia")


def test_a_gap_out_of_range_is_rejected_naming_the_file(tmp_path):
    path = tmp_path / "graph_replay.yaml"
    path.write_text("vendors:\n  nvidia: {kernel_gap_s: -1.0e-6, fit_rows: 1, "
                    "source: s}\n", encoding="utf-8")
    with pytest.raises(InputError, match="graph_replay.yaml"):
        load_graph_replay(path)
