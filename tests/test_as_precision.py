"""``specs.hardware.as_precision``: text from files or flags narrowed to ``Precision`` (issue 22)."""

import pytest

from perfcast.errors import InputError
from perfcast.specs.hardware import PRECISIONS, as_precision


def test_every_precision_passes_through() -> None:
    assert [as_precision(p) for p in PRECISIONS] == list(PRECISIONS)
    assert "bf16" in PRECISIONS and "fp8" in PRECISIONS


def test_unknown_precision_names_field_and_value() -> None:
    with pytest.raises(InputError, match=r"kernel_table precision='bf17'"):
        as_precision("bf17", "kernel_table precision")
