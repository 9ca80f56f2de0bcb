"""Time of one kernel on one GPU (GEMM, flash attention, memory-bound), by pluggable backends.

Knows nothing of LLMs: the graph layer turns a model into kernel shapes, this layer times them.

>>> from perfcast.kernels import get_backend
>>> backend = get_backend("roofline")   # doctest: +SKIP
>>> backend.gemm_time_s(gpu, m=8192, n=8192, k=8192)   # doctest: +SKIP
"""

from perfcast.kernels.backend import KernelBackend, KernelBackendName, backend_names, get_backend

__all__ = ["KernelBackend", "KernelBackendName", "backend_names", "get_backend"]
