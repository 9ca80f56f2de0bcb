"""Refit the shipped end-to-end calibration on ../shared/ground_truth: one way to fit.

Equivalent to

    perfcast calibrate --data ../shared/ground_truth/training.csv \
        --data ../shared/ground_truth/inference.csv --out src/perfcast/calibration

with the package's default kernel backend (``perfcast.kernels.backend.DEFAULT_KERNEL_BACKEND``).
The fitting itself lives in the package (``perfcast.validate.fit_training``,
``fit_inference``, ``calibrate``); tests/test_calibration_fit.py checks that the shipped files
are its output.

    python tools/fit_calibration.py [--write]
"""

from __future__ import annotations

import sys
from pathlib import Path

from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND
from perfcast.validate.calibrate import calibrate

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared/ground_truth"


def main(write: bool) -> None:
    from perfcast.report.calibrate_text import render_calibration
    from perfcast.report.console import make_console

    out = ROOT / "src/perfcast/calibration" if write else None
    result = calibrate([DATA / "training.csv", DATA / "inference.csv"], out,
                       DEFAULT_KERNEL_BACKEND.value)
    render_calibration(result, make_console())


if __name__ == "__main__":
    main("--write" in sys.argv)
