"""Cross-validation of the public data, computed once per test session (shared by
test_training_validation.py, test_inference_validation.py and test_calibration_fit.py)."""

from __future__ import annotations

from functools import cache

from perfcast.calibration.bundle import load_calibration
from perfcast.validate.cross_validate import (
    CrossValidation,
    cross_validate_inference,
    cross_validate_training,
)
from perfcast.validate.fit_graph_replay import GapTable, build_gap_table
from perfcast.validate.fit_inference import ServingRows, load_inference_cases
from perfcast.validate.fit_training import TrainingData, load_training_data
from perfcast.validate.serving_table import ServingTable

from conftest import shared_path


@cache
def training_data() -> TrainingData:
    """Response table of every forecastable row of training.csv (shipped calibration)."""
    return load_training_data([shared_path("ground_truth", "training.csv")], load_calibration())


@cache
def training_cv() -> CrossValidation:
    return cross_validate_training(training_data())


@cache
def serving_rows() -> ServingRows:
    return load_inference_cases([shared_path("ground_truth", "inference.csv")])


@cache
def serving_table() -> ServingTable:
    from perfcast.estimate.inference import estimate_inference

    return ServingTable(serving_rows().fit_cases(), load_calibration(), estimate_inference)


@cache
def gap_table() -> GapTable:
    """Decode rows the graph kernel gap reaches, at each node (shipped calibration)."""
    return build_gap_table(serving_rows().cases, load_calibration())


@cache
def serving_cv() -> CrossValidation:
    return cross_validate_inference(serving_rows(), load_calibration(), serving_table(),
                                    gap_table())
