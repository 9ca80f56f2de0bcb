"""Type aliases for array-friendly formulas: one value, or a numpy array of values.

Cost formulas use arithmetic and numpy ufuncs only, so the same function evaluates one
strategy (floats) or a million (numpy arrays, broadcast together); these aliases say so in
signatures. A float in gives a float (or numpy scalar) out; an array in gives an array out.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from numpy.typing import NDArray

Floats: TypeAlias = float | NDArray[Any]
"""A float (ints welcome) or a numpy array of numbers."""

Bools: TypeAlias = bool | NDArray[Any]
"""A bool or a numpy array of bools."""
