"""Sustained matrix clock of a GPU run below its rated board power (a power-capped SKU).

Under dense matrix load a GPU is power-limited: the firmware lowers the clock until board power
meets the limit. Dynamic power is P ≈ C·V²·f with the voltage scaled with the clock, so the
sustained clock rises with the power limit by a power law f ∝ P^α (α = 1/3 for pure dynamic power
with V ∝ f; board power that does not scale with the compute clock — static, HBM, fabric —
makes the clock more sensitive to the cap and pushes α up).

α is not assumed: it is measured on one piece of silicon at two power limits. AMD's
"Measuring Max-Achievable FLOPs" blog (ROCm blogs, MAF part 2; shared/reference/
kernel_efficiency.csv lines 24 and 27) runs the same dense BF16 hipBLASLt GEMM on the MI300X
(750 W) and MI325X (1000 W) — same die, CUs and peak clock — and reads median engine clocks of
1207 and 1447 MHz: α = ln(1447/1207)/ln(1000/750) = 0.63. The catalog names that pair
(``power_clock_model`` in gpus.yaml) and this module derives α from their catalog entries, so
each number lives once.
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats


def power_clock_exponent(clock_low_Hz: float, power_low_W: float,
                         clock_high_Hz: float, power_high_W: float) -> float:
    """α in f ∝ P^α from one die's sustained clocks at two power limits (dimensionless).

    α = ln(f_high/f_low) / ln(P_high/P_low) (module docstring; MI300X/MI325X MAF clocks)."""
    if power_high_W == power_low_W:
        raise ValueError(f"power limits must differ (got {power_low_W} W twice)")
    return float(np.log(clock_high_Hz / clock_low_Hz) / np.log(power_high_W / power_low_W))


def power_limited_clock_Hz(rated_clock_Hz: Floats, power_limit_W: Floats, rated_power_W: Floats,
                           exponent: float) -> Floats:
    """Sustained matrix clock, Hz, at ``power_limit_W`` of a part that sustains
    ``rated_clock_Hz`` at its rated board power ``rated_power_W``:

        f = f_rated · min(1, P_limit / P_rated)^α

    A limit above the rating does not raise the clock (the rated clock is already the sustained
    one at full power; boost ceilings cap it). Array-friendly."""
    ratio = np.minimum(1.0, np.divide(power_limit_W, rated_power_W))
    return rated_clock_Hz * ratio ** exponent
