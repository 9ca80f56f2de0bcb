"""Storage sizes of numeric formats: the one table every layer uses.

Format widths per IEEE 754 (fp32, fp16), bfloat16 (Google Brain), OCP 8-bit/MX formats
(fp8 E4M3/E5M2, fp6, fp4) and integer types; block scales are not counted.
"""

from __future__ import annotations

from typing import Final, Literal

from perfcast.specs.hardware import Precision

StorageFormat = Precision | Literal["int4"]

BYTES_PER_ELEMENT: Final[dict[str, float]] = {
    "fp32": 4.0,
    "tf32": 4.0,  # TF32 is an FP32 storage format; only the tensor-core math is 19-bit.
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp6": 0.75,
    "fp4": 0.5,
    "int8": 1.0,
    "int4": 0.5,
}
"""Bytes of one stored element of each format."""

ACTIVATION_BYTES: Final[float] = BYTES_PER_ELEMENT["bf16"]
"""Activations and working weights in mixed-precision training are 16-bit (bf16/fp16)."""

MASK_BYTES: Final[float] = 1.0
"""A dropout mask element is stored as one byte (Korthikanti et al. 2022 §4.1)."""


def bytes_per_element(fmt: str) -> float:
    """Bytes of one stored element of ``fmt`` (see ``BYTES_PER_ELEMENT``)."""
    return BYTES_PER_ELEMENT[fmt]
