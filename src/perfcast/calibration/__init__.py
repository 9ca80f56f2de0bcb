"""Calibration data: efficiency factors and allowances fitted to measurements, as typed models.

Each data file (``*.yaml`` next to its loader module) is produced or reviewed by a tool outside
the package (``tools/``) and says in its header where it comes from; each value carries its
source. Loaders validate the file once and cache the result. Import the loader modules
directly (this package imports nothing, so that each loader stays independent):

* ``kernel_roofline``: GEMM / attention / HBM efficiencies and launch overhead per GPU
  generation (used by ``perfcast.kernels.roofline``).
* ``comm_alpha_beta``: achievable fraction of link bandwidth per network tier
  (used by ``perfcast.comm``).
* ``memory_overheads``: memory the formulas do not see (used by ``perfcast.memory``).
"""
