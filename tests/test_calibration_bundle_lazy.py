"""``Calibration`` reads its serving-only files on first use, from the same directory and with
the same shipped fallback as the files it reads at once (``calibration.bundle``, issue 18)."""

from __future__ import annotations

import pytest
import yaml

from perfcast.calibration.bundle import FILE_NAMES, load_calibration
from perfcast.calibration.graph_replay import GRAPH_REPLAY_PATH, load_graph_replay
from perfcast.calibration.inference_overheads import (
    INFERENCE_OVERHEADS_PATH,
    load_inference_overheads,
)
from perfcast.errors import InputError


def test_file_names_are_the_modules_own_paths() -> None:
    assert FILE_NAMES["inference_overheads"] == INFERENCE_OVERHEADS_PATH.name
    assert FILE_NAMES["graph_replay"] == GRAPH_REPLAY_PATH.name


def test_shipped_calibration_reads_the_shipped_serving_files() -> None:
    cal = load_calibration()
    assert cal.serving_overheads is None and cal.graph_replay is None
    assert cal.inference_overheads == load_inference_overheads()
    assert cal.graph_gaps == load_graph_replay()


def test_a_directory_file_is_read_on_first_use(tmp_path) -> None:
    shipped = load_inference_overheads()
    changed = shipped.model_copy(update={
        "gqa_kv_read_exponent": shipped.gqa_kv_read_exponent + 0.125})
    (tmp_path / FILE_NAMES["inference_overheads"]).write_text(
        yaml.safe_dump(changed.model_dump(mode="json")), encoding="utf-8")
    mine = load_calibration(tmp_path)
    assert mine.inference_overheads.gqa_kv_read_exponent == pytest.approx(
        shipped.gqa_kv_read_exponent + 0.125)
    assert mine.graph_gaps == load_graph_replay()  # not in the directory: shipped


def test_replaced_serving_overheads_win() -> None:
    base = load_calibration()
    changed = base.inference_overheads.model_copy(update={"gqa_kv_read_exponent": 0.5})
    assert base.replace(serving_overheads=changed).inference_overheads is changed
    assert base.inference_overheads is not changed


def test_an_invalid_serving_file_fails_where_it_is_read_naming_it(tmp_path) -> None:
    """A training forecast with ``--calibration DIR`` never reads the serving file; a serving
    forecast gets the one-line ``InputError`` naming it."""
    path = tmp_path / FILE_NAMES["inference_overheads"]
    path.write_text("- not a mapping\n", encoding="utf-8")
    mine = load_calibration(tmp_path)
    assert mine.training_overheads == load_calibration().training_overheads
    with pytest.raises(InputError, match="inference_overheads.yaml"):
        mine.inference_overheads  # noqa: B018 - the read under test
