"""The kernel-time interface (``KernelBackend``) and the enum-keyed registry of its backends.

A backend answers "how long does this one kernel take on this GPU?" for the three kernel kinds
the graph layer emits: GEMMs, flash attention and memory-bound (element-wise, norm, copy)
kernels. Every method is array-friendly: shapes may be floats or numpy arrays (broadcast
together), so one call can time a million candidate strategies.

Backends (one implementation per file):

* ``ROOFLINE`` (``kernels/roofline.py``): max(compute, memory) at fitted efficiencies.
* ``ANALYTICAL`` (``kernels/analytical.py``): tile/wave GEMM, flash-attention work units,
  memory-bound kernels, from per-SM rates at the sustained clock.
* ``MEASURED`` (``kernels/measured.py``): interpolates a table of measured kernel times
  (``perfcast profile`` writes one), analytical outside it.

A new backend adds one ``KernelBackendName`` member and one ``_BACKENDS`` entry.
"""

from __future__ import annotations

import importlib
from enum import StrEnum
from functools import cache
from typing import Protocol, runtime_checkable

from perfcast.arrays import Bools, Floats
from perfcast.calibration.attention_kernels import AttentionKernelCalibration
from perfcast.errors import InputError
from perfcast.specs.hardware import GPUSpec, Precision
from perfcast.specs.strategy import AttentionKernel


class KernelBackendName(StrEnum):
    """Registered kernel-time backends."""

    ROOFLINE = "roofline"
    ANALYTICAL = "analytical"
    MEASURED = "measured"


@runtime_checkable
class KernelBackend(Protocol):
    """Time of one kernel on one GPU, seconds. All shape arguments broadcast as numpy arrays."""

    name: KernelBackendName

    @property
    def attention_kernels(self) -> AttentionKernelCalibration:
        """The derived kernel classes this backend times (``calibration/attention_kernels.yaml``):
        attention classes timed as a calibrated class × a ratio (``kernels.attention_kernels``)
        and FP8 scaled-matmul classes slower than the calibrated FP8 GEMM
        (``kernels.scaled_gemm``)."""
        ...

    def with_attention_kernels(self, kernels: AttentionKernelCalibration) -> KernelBackend:
        """This backend timing the derived classes of ``kernels`` (``self`` when they are
        already its own); every other calibration unchanged."""
        ...

    def gemm_time_s(
        self,
        gpu: GPUSpec,
        m: Floats,
        n: Floats,
        k: Floats,
        batch: Floats = 1,
        precision: Precision = "bf16",
        *,
        gemm_pass: str | None = None,
        grouped: bool = False,
    ) -> Floats:
        """``batch`` GEMMs C[m,n] = A[m,k]·B[k,n] (2·m·n·k·batch FLOPs), seconds.

        ``gemm_pass`` (a ``graph.ops.Phase`` value: forward, backward_dgrad, backward_wgrad;
        None = unknown) lets a measured table pick points of the pass's layout. ``grouped``:
        the ``batch`` GEMMs run as one grouped (MoE routed-expert) kernel, which a backend
        with a grouped-GEMM efficiency of its own times at that efficiency."""
        ...

    def attention_time_s(
        self,
        gpu: GPUSpec,
        batch: Floats,
        num_heads: Floats,
        seq_q: Floats,
        seq_kv: Floats,
        head_dim_qk: Floats,
        head_dim_v: Floats,
        causal: Bools,
        backward: bool,
        precision: Precision = "bf16",
        *,
        num_kv_heads: Floats | None = None,
        kernel: AttentionKernel = "auto",
    ) -> Floats:
        """One flash-attention forward (or backward) pass, seconds.

        ``num_kv_heads`` (GQA/MQA) only changes the K/V bytes read; None = ``num_heads``.
        ``kernel`` is the kernel class (``Strategy.attention_kernel``); a class with no
        calibration for ``gpu``'s generation raises ``InputError``.
        """
        ...

    def memory_bound_time_s(self, gpu: GPUSpec, bytes_moved: Floats) -> Floats:
        """A kernel that streams ``bytes_moved`` bytes through HBM (reads + writes), seconds."""
        ...


KernelBackendRef = KernelBackendName | str | KernelBackend
"""What ``get_backend`` takes: a registered name (enum or string) or a backend instance (e.g. a
``MeasuredBackend`` over a user's ``--kernel-table``)."""

DEFAULT_KERNEL_BACKEND = KernelBackendName.ANALYTICAL
"""Backend of ``estimate_training``, the search and ``perfcast train``/``validate`` when none
is named (the CLI mirrors it in ``cli.options.DEFAULT_KERNEL_BACKEND_OPT``; a test checks).
Serving (``estimate_inference``) times its kernels with the roofline calibration."""

_BACKENDS: dict[KernelBackendName, str] = {
    KernelBackendName.ROOFLINE: "perfcast.kernels.roofline:RooflineBackend",
    KernelBackendName.ANALYTICAL: "perfcast.kernels.analytical:AnalyticalBackend",
    KernelBackendName.MEASURED: "perfcast.kernels.measured:MeasuredBackend",
}
"""Backend name -> ``module:class`` (imported on first use; the class takes no arguments)."""


def backend_names() -> list[str]:
    """Names of the registered backends, for CLI choices and error messages."""
    return [name.value for name in KernelBackendName]


@cache
def _instantiate(name: KernelBackendName) -> KernelBackend:
    module_name, _, class_name = _BACKENDS[name].partition(":")
    backend_cls = getattr(importlib.import_module(module_name), class_name)
    return backend_cls()


def get_backend(
    name: KernelBackendRef = DEFAULT_KERNEL_BACKEND,
) -> KernelBackend:
    """The backend registered as ``name`` with its shipped calibration (one shared instance);
    a backend instance (e.g. ``MeasuredBackend`` over a user's table) is returned as it is.

    Raises ``InputError`` naming the value and the choices for an unknown name.
    """
    if not isinstance(name, str):
        return name
    try:
        key = KernelBackendName(name)
    except ValueError:
        choices = backend_names()
        raise InputError("kernel_backend", name, f"unknown; choose from {choices}") from None
    return _instantiate(key)
