"""Unit constants. Everything inside perfcast is SI (s, bytes, FLOPs, bytes/s).

Conversion happens once: at catalog load (vendor units -> SI) and at display (SI -> GiB, ms).
"""

from __future__ import annotations

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12

TERA = 1e12
GIGA = 1e9
MEGA = 1e6

BITS_PER_BYTE = 8


def tflops_to_flops(tflops: float) -> float:
    """TFLOP/s (vendor datasheets, 10^12) -> FLOP/s."""
    return tflops * TERA


def gbps_to_Bps(gigabits_per_s: float) -> float:
    """Gbit/s (NIC line rate, 10^9 bits) -> bytes/s."""
    return gigabits_per_s * GIGA / BITS_PER_BYTE


def bytes_to_GiB(num_bytes: float) -> float:
    """bytes -> GiB (2^30), for display only."""
    return num_bytes / GiB
