"""Type aliases for array-friendly formulas: one value, or a numpy array of values.

Cost formulas use arithmetic and numpy ufuncs only, so the same function evaluates one
strategy (floats) or a million (numpy arrays, broadcast together); these aliases say so in
signatures. A float in gives a float (or numpy scalar) out; an array in gives an array out.
"""

from __future__ import annotations

from numbers import Real
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

Floats: TypeAlias = float | NDArray[Any]
"""A float (ints welcome) or a numpy array of numbers."""

Bools: TypeAlias = bool | NDArray[Any]
"""A bool or a numpy array of bools."""

_SCALAR_TYPES = frozenset({int, float, bool, np.float64, np.int64, np.bool_})


def all_scalars(*values: object) -> bool:
    """True when every value is one number or bool (Python or numpy scalar), not an array:
    the calls a kernel model may memoize."""
    for v in values:  # a loop, not all(genexpr): this runs for every op the estimator times
        if type(v) not in _SCALAR_TYPES and not isinstance(v, Real | np.bool_):
            return False
    return True
