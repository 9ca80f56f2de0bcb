"""The graph kernel gap as a calibrated parameter (``validate.fit_graph_replay``): the shipped
``graph_replay.yaml`` is the fit of the public rows, every serving CV fold refits it without its
source, and ``--calibration DIR`` carries it to the forecasts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.calibration.bundle import load_calibration
from perfcast.calibration.graph_replay import load_graph_replay
from perfcast.cli.main import app
from perfcast.validate.calibration_writer import write_graph_replay_file
from perfcast.validate.fit_graph_replay import NODES_S, build_gap_table, fit_graph_replay
from perfcast.validate.inference_compare import compare_serving_case
from perfcast.validate.serving_compare import ServingReportCache

from cv_data import gap_table, serving_cv, serving_rows

ROUNDING = 1e-3
"""Values are written with 4 significant digits."""
runner = CliRunner()


def _fold(source: str):
    return next(f for f in serving_cv().folds if f.source_id == source)


def test_shipped_gaps_are_the_fit_of_the_public_data():
    fit = fit_graph_replay(gap_table())
    shipped = load_graph_replay()
    assert shipped.fit is not None and shipped.fit.num_rows == fit.rows_used >= 100
    for vendor in ("nvidia", "amd"):
        value = fit.value_s(vendor)
        assert shipped.kernel_gap_s(vendor) == pytest.approx(value, rel=ROUNDING)
        assert shipped.vendors[vendor].fit_rows == fit.rows_by_vendor[vendor] >= 30
        record = shipped.fit.parameters[f"kernel_gap_s[{vendor}]"]
        assert record.standard_error and record.standard_error < value and not record.at_bound
        low, high = serving_cv().parameter_range(f"kernel_gap_s[{vendor}]")
        assert shipped.vendors[vendor].loso_range_s == pytest.approx((low, high), rel=ROUNDING)
    assert fit.fallback_vendors == ()
    assert fit.value_s("amd") > fit.value_s("nvidia") > 0


def test_the_table_interpolates_direct_forecasts_within_two_percent():
    """Between nodes log(predicted) is nearly linear in the gap (``NODES_S``)."""
    table = gap_table()
    gap = 0.5 * (NODES_S[1] + NODES_S[2])
    direct = build_gap_table(serving_rows().cases, load_calibration(), (gap, NODES_S[-1]))
    rows = {r: i for i, r in enumerate(direct.row_ids)}
    mine = np.array([rows[r] for r in table.row_ids])
    interpolated = table.log_predicted_at(gap, np.ones(len(table.row_ids), bool))
    assert np.max(np.abs(interpolated - direct.log_predicted[mine, 0])) < 0.02


def test_every_serving_fold_refits_the_gap_without_its_source():
    """Each fold's gaps are the fit on the table without the held-out source's rows. The fit is
    an L1 minimum, at one row's zero crossing: leaving a source out moves it unless that
    source's rows balance around it (dstack 405B: 3 AMD + 2 NVIDIA rows leave both minimisers
    where they are since branch dsr17 made the MI300X DeepSeek-R1 rows' GEMMs slower), so a
    source with rows need not move it; one without rows never does."""
    table = gap_table()
    full = fit_graph_replay(table)
    sources = set(table.source_ids.tolist())
    moved_folds = 0
    for fold in serving_cv().folds:
        assert fold.graph_replay is not None
        own = (fit_graph_replay(table, exclude_source=fold.source_id)
               if fold.source_id in sources else full)
        for vendor in ("nvidia", "amd"):
            assert fold.graph_replay.value_s(vendor) == pytest.approx(
                own.value_s(vendor), rel=1e-12), fold.source_id
        moved = any(abs(own.value_s(v) - full.value_s(v)) > 1e-12 for v in ("nvidia", "amd"))
        assert moved <= (fold.source_id in sources), fold.source_id
        moved_folds += moved
    assert moved_folds >= len(sources) // 2
    # InferenceX carries most NVIDIA graphed-decode rows: without them the gap is refit
    fold = _fold("semianalysis-inferencex")
    assert fold.graph_replay.value_s("nvidia") > 1.3 * full.value_s("nvidia")
    assert fold.graph_replay.rows_used < full.rows_used


def test_held_out_rows_are_forecast_with_the_fold_gap():
    from functools import partial

    from perfcast.estimate.serving import estimate_serving
    from perfcast.validate.fit_inference import fit_inference

    source = "semianalysis-inferencex"
    fold = _fold(source)
    row = next(r for r in fold.rows if r.metric == "tpot" and r.gpu.startswith("b200"))
    case = next(c for c in serving_rows().cases if c.row_id == row.row_id)
    overheads = fit_inference(serving_rows(), load_calibration(),
                              exclude_source=source).calibration.inference_overheads
    at = {}
    for name, gaps in (("fold", fold.graph_replay.calibration), ("shipped", load_graph_replay())):
        cal = load_calibration().replace(serving_overheads=overheads, graph_replay=gaps)
        cache = ServingReportCache(partial(estimate_serving, calibration=cal))
        at[name] = compare_serving_case(case, cache).predicted
    assert row.predicted == pytest.approx(at["fold"], rel=1e-9)
    assert at["fold"] > at["shipped"]  # the fold's larger gap: slower decode


def test_a_calibration_dir_with_a_changed_gap_changes_a_graphed_decode_forecast(tmp_path):
    fit = fit_graph_replay(gap_table())
    doubled = fit.calibration.model_copy(update={"vendors": {
        v: e.model_copy(update={"kernel_gap_s": 2 * e.kernel_gap_s})
        for v, e in fit.calibration.vendors.items()}})
    path = write_graph_replay_file(
        type(fit)(fit.parameters, doubled, fit.rows_used, fit.rows_by_vendor, ()), tmp_path,
        {"inference.csv": "0" * 64}, {})
    assert path.name == "graph_replay.yaml"
    assert load_calibration(tmp_path).graph_gaps.kernel_gap_s("nvidia") == pytest.approx(
        2 * fit.value_s("nvidia"), rel=ROUNDING)
    args = ["infer", "-m", "llama-3.1-8b", "--system", "dgx-h100", "--concurrency", "16",
            "--input-len", "1024", "--output-len", "256", "--json"]
    shipped = runner.invoke(app, args)
    mine = runner.invoke(app, args + ["--calibration", str(tmp_path)])
    assert shipped.exit_code == 0 and mine.exit_code == 0, mine.output
    tpot = [json.loads(r.stdout)["tpot_s"] for r in (shipped, mine)]
    assert tpot[1] > tpot[0] * 1.01
