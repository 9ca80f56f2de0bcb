"""One BLAS thread for the ``perfcast`` process unless the user chose a count.

numpy's OpenBLAS starts a pool of one thread per core when numpy is imported; the idle threads
spin before they sleep (OpenBLAS ``blas_thread_server``, ``THREAD_TIMEOUT``). perfcast's numpy
work is element-wise ufuncs over strategy arrays, which OpenBLAS does not thread, and the
calibration fits' matrices are a few parameters wide, so the pool buys nothing and costs CPU
time: ``perfcast train`` spent 0.39 s of CPU against 0.29 s of wall time on a 2-core machine
(benchmarks/train_process_time.py), 0.29 s with one thread. Parallel searches use processes,
each of which wants one BLAS thread anyway.

The variables must be set before numpy is first imported; the CLI imports numpy only inside
commands, after ``run`` has called ``limit_blas_threads``. A count the user set in any of the
variables OpenBLAS reads (``OPENBLAS_NUM_THREADS``, ``GOTO_NUM_THREADS``, ``OMP_NUM_THREADS``)
is left as it is.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
"""Environment variables OpenBLAS reads for its thread count, in its order of precedence."""


def limit_blas_threads(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set ``OPENBLAS_NUM_THREADS=1`` in ``environ`` unless one of
    ``BLAS_THREAD_VARIABLES`` is already set; True when it set it."""
    if any(name in environ for name in BLAS_THREAD_VARIABLES):
        return False
    environ["OPENBLAS_NUM_THREADS"] = "1"
    return True
