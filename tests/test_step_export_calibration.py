"""The roofline/timeline exports of ``perfcast train --plot/--report`` time their operators with
the Calibration the forecast used (issue 18 item 4: one Calibration through every path): a
user's MoE routing imbalance reaches the roofline points, as it reaches ``estimate_training``
and the bulk search, and the CLI hands its ``--calibration DIR`` and kernel backend on."""

from __future__ import annotations

import pytest

from perfcast.calibration.bundle import load_calibration
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training_timeline import stage_operator_points
from perfcast.specs.strategy import Strategy

SEQ = 4096


def _with_imbalance(value: float):
    """The shipped calibration with another dropless routing imbalance (a user's file)."""
    shipped = load_calibration()
    block = shipped.routing.dropless_load_imbalance.model_copy(update={"value": value})
    return shipped.replace(moe_routing=shipped.routing.model_copy(
        update={"dropless_load_imbalance": block}))


@pytest.fixture(scope="module")
def moe_case():
    model, system = load_model("mixtral-8x7b"), load_system("dgx-h100")
    strategy = Strategy(num_gpus=8, ep=8, micro_batch_size=1, distributed_optimizer=True)
    return model, system, strategy


def _flops_by_name(points) -> dict[str, float]:
    return {p.name: p.flops for p in points}


def test_points_use_the_calibrations_routing_imbalance(moe_case) -> None:
    """Under a user's imbalance of 1.0 the points equal those of the strategy stating 1.0,
    and the expert GEMMs differ from the shipped (learned, > 1) imbalance's."""
    model, system, strategy = moe_case
    shipped_value = load_calibration().routing.dropless_load_imbalance.value
    assert shipped_value > 1.0
    user = stage_operator_points(model, system, strategy, SEQ, 0,
                                 calibration=_with_imbalance(1.0))
    stated = stage_operator_points(model, system, strategy.model_copy(
        update={"moe_load_imbalance": 1.0}), SEQ, 0)
    shipped = stage_operator_points(model, system, strategy, SEQ, 0)
    assert user == stated
    changed = [name for name, flops in _flops_by_name(shipped).items()
               if flops != _flops_by_name(user)[name]]
    assert changed, "no operator moved with the routing imbalance"
    for name in changed:
        ratio = _flops_by_name(shipped)[name] / _flops_by_name(user)[name]
        assert ratio == pytest.approx(shipped_value, rel=1e-9), name


def test_points_default_to_the_shipped_calibration(moe_case) -> None:
    model, system, strategy = moe_case
    assert stage_operator_points(model, system, strategy, SEQ, 0) == stage_operator_points(
        model, system, strategy, SEQ, 0, calibration=load_calibration())


def test_train_hands_its_calibration_and_backend_to_the_exports(tmp_path, monkeypatch) -> None:
    """``perfcast train --calibration DIR --trace FILE`` passes the loaded Calibration and the
    kernel backend it forecast with to ``write_step_exports``."""
    from typer.testing import CliRunner

    import perfcast.report.step_exports as exports
    from perfcast.calibration.moe_routing import MOE_ROUTING_PATH
    from perfcast.cli.main import build_app

    seen = {}

    def record(report, model, system, workload, trace=None, plot_dir=None, html_path=None,
               command=None, kernel_backend=None, calibration=None):
        seen.update(calibration=calibration, kernel_backend=kernel_backend)
        return []

    monkeypatch.setattr(exports, "write_step_exports", record)
    (tmp_path / MOE_ROUTING_PATH.name).write_text(MOE_ROUTING_PATH.read_text(encoding="utf-8"),
                                                  encoding="utf-8")
    result = CliRunner().invoke(build_app("train"), [
        "train", "-m", "mixtral-8x7b", "-g", "8", "--ep", "8", "--calibration", str(tmp_path),
        "--trace", str(tmp_path / "t.json")])
    assert result.exit_code == 0, result.output
    assert seen["calibration"] is load_calibration(tmp_path)
    assert seen["calibration"].directory == tmp_path
    assert seen["kernel_backend"] is not None and not isinstance(seen["kernel_backend"], str)


def test_fit_advice_forecasts_with_the_calibration(moe_case) -> None:
    """The step time ``fit_advice`` ranks by (and prints) is the forecast under the
    calibration the command was given, not the shipped one."""
    from perfcast.estimate.training import estimate_training
    from perfcast.memory.estimate import estimate_memory
    from perfcast.search.fit_advice import fit_advice
    from perfcast.specs.workload import Workload

    model, _, _ = moe_case
    system = load_system("dgx-h100", num_gpus=16)
    strategy = Strategy(num_gpus=16, ep=8, micro_batch_size=1)
    workload = Workload(seq_length=SEQ, global_batch_size=64)
    assert not estimate_memory(model, system, strategy, workload).fits
    mine = _with_imbalance(1.0)
    advice = fit_advice(model, system, strategy, workload, calibration=mine)
    assert advice is not None
    user = estimate_training(model, system, advice.strategy, workload, calibration=mine)
    shipped = estimate_training(model, system, advice.strategy, workload)
    assert advice.step_time_s == pytest.approx(user.step_time_s, rel=1e-12)
    assert shipped.step_time_s > user.step_time_s * (1 + 1e-6)
