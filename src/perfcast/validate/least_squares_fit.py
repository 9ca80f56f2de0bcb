"""Bounded robust least squares with standard errors: the solver of every calibration fit.

Residuals are log(predicted / measured) per row (a relative error, symmetric in over- and
under-prediction). ``scipy.optimize.least_squares`` (trust-region reflective, bounds) minimises
Σ ρ(r_i²) with the ``soft_l1`` loss ρ(z) = 2·f²·(√(1 + z/f²) − 1) at scale f = ``F_SCALE``:
quadratic for |r| ≪ f, linear beyond, so a few rows the model does not describe (a mis-stated
configuration, a campaign average) pull the fit like absolute errors, not squares.

Standard errors: cov = s²·(JᵀJ)⁻¹ with J the loss-scaled Jacobian scipy returns at the optimum
(its JᵀJ is the Gauss-Newton Hessian of the robust cost) and s² = 2·cost/(m − n), the
residual variance per degree of freedom (Press et al., Numerical Recipes §15.5). A parameter
at a bound, or a singular JᵀJ, gets the diagonal of the pseudo-inverse (a parameter the data
do not constrain shows a large or zero error and ``at_bound``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

F_SCALE = 0.05
"""soft_l1 scale: residuals beyond ~5% count linearly (the noise floor of the public data is
'a few percent to about 10%' between software versions, ground_truth/README.md)."""
LOSS = "soft_l1"
LOSS_TEXT = f"log(predicted/measured), scipy least_squares loss={LOSS} f_scale={F_SCALE}"
BOUND_TOLERANCE = 1e-6
"""A value within this share of its range from a bound is reported ``at_bound``."""


@dataclass(frozen=True)
class ParameterEstimate:
    """One fitted parameter."""

    name: str
    value: float
    standard_error: float | None
    """None when the fit has no degrees of freedom left or no row depends on the parameter
    (its value is then the start of the fit, not an estimate)."""
    at_bound: bool
    low: float
    high: float

    def to_dict(self) -> dict:
        return {"value": self.value, "standard_error": self.standard_error,
                "at_bound": self.at_bound, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Bounded:
    """A parameter to fit: name, start value and range."""

    name: str
    start: float
    low: float
    high: float


def solve(residuals: Callable[[np.ndarray], np.ndarray], parameters: Sequence[Bounded],
          tolerance: float = 1e-10) -> tuple[tuple[ParameterEstimate, ...], np.ndarray]:
    """Minimise the robust cost of ``residuals(x)``; the estimates and the final residuals.

    ``tolerance``: scipy's xtol = ftol = gtol (looser for residuals that cost a full forecast
    per row and trial)."""
    low = np.array([p.low for p in parameters], float)
    high = np.array([p.high for p in parameters], float)
    x0 = np.clip(np.array([p.start for p in parameters], float), low, high)
    result = least_squares(residuals, x0, bounds=(low, high), loss=LOSS, f_scale=F_SCALE,
                           method="trf", diff_step=1e-3, x_scale="jac", xtol=tolerance,
                           ftol=tolerance, gtol=tolerance, max_nfev=2000)
    errors = _standard_errors(result.jac, 2 * result.cost, len(result.fun))
    span = high - low
    estimates = tuple(
        ParameterEstimate(
            name=p.name, value=float(result.x[i]), standard_error=errors[i],
            at_bound=bool(min(result.x[i] - low[i], high[i] - result.x[i])
                          <= BOUND_TOLERANCE * span[i]),
            low=float(low[i]), high=float(high[i]))
        for i, p in enumerate(parameters))
    return estimates, np.asarray(result.fun)


def _standard_errors(jac: np.ndarray, sum_sq: float, m: int) -> list[float | None]:
    """sqrt(diag(s²·(JᵀJ)⁺)) with s² = sum_sq / (m − n); None without degrees of freedom."""
    n = jac.shape[1]
    if m <= n:
        return [None] * n
    cov = np.linalg.pinv(jac.T @ jac) * (sum_sq / (m - n))
    free = np.any(jac != 0, axis=0)  # a column of zeros: no row constrains the parameter
    return [float(np.sqrt(max(cov[i, i], 0.0))) if free[i] else None for i in range(n)]
