"""Which calibrated constants a forecast borrowed because its GPU generation has no measurement.

Kernel efficiencies (``calibration/kernel_analytical.yaml``, ``kernel_roofline.yaml``) and the
scale-up collective efficiency (``calibration/comm_alpha_beta.yaml``) are fitted per GPU
generation; a generation without measurements (Gaudi, TPU, CDNA2, a user's own GPU of such a
generation) gets each file's ``default`` block, which is taken from fits on other GPUs, often
another vendor's. A generation with a block of its own can still have one kernel class
``transferred`` from another generation (2026-11: CDNA3 attention from Hopper, no ROCm attention
measurement in ../shared/reference). A forecast never uses those silently: the names returned here go into the
report's ``calibration.stand_ins`` and its text note.
"""

from __future__ import annotations

from typing import Any

from perfcast.calibration.comm_alpha_beta import load_comm_alpha_beta
from perfcast.specs.hardware import GPUSpec


def calibration_stand_ins(backend: Any, gpu: GPUSpec) -> tuple[str, ...]:
    """Names of the constants taken from ``default`` blocks, or transferred from another
    generation, for ``gpu``'s generation, in the order kernel, collective; empty when the
    generation has its own fits."""
    names = []
    uses_default = getattr(backend, "uses_default", None)
    if uses_default is not None and uses_default(gpu):
        names.append(f"kernel efficiencies ({getattr(backend, 'name', 'kernel')} backend "
                     "'default' block)")
    transferred = getattr(backend, "transferred_parts", None)
    if transferred is not None:
        names.extend(transferred(gpu))
    if load_comm_alpha_beta().uses_default(gpu.generation):
        names.append("scale-up collective efficiency (comm_alpha_beta.yaml 'default')")
    return tuple(names)
