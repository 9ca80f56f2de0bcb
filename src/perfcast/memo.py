"""Memo tables per frozen spec object, found by identity first.

Hashing a frozen pydantic spec (``GPUSpec``, ``SystemSpec``) hashes every field, about a
microsecond each time; a forecast times ~100 ops, each asking a memo keyed on the same GPU or
system object. ``PerObjectMemo`` keeps one memo (an ``lru_cache`` of a function with the
object bound) per distinct object and remembers the one used last: the same object again is
found by ``is`` without hashing it; an equal object (a copy) finds the same memo by equality,
so the values returned are exactly those of the unmemoized function.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from functools import lru_cache, partial
from typing import Any, cast

import numpy as np

MAX_OBJECTS = 256
"""Distinct objects kept; past that the tables are dropped and rebuilt on demand."""


class PerObjectMemo:
    """``memo(obj)`` -> ``lru_cache(maxsize)(partial(function, obj))``, one per distinct ``obj``.

    Thread-safe: the last (object, memo) pair is one tuple, replaced in one assignment."""

    __slots__ = ("_function", "_maxsize", "_tables", "_last")

    def __init__(self, function: Callable[..., Any], maxsize: int) -> None:
        self._function = function
        self._maxsize = maxsize
        self._tables: dict[Hashable, Callable[..., Any]] = {}
        self._last: tuple[object, Callable[..., Any] | None] = (None, None)

    def __call__(self, obj: Hashable) -> Callable[..., Any]:
        last_obj, last_memo = self._last
        if last_obj is obj and last_memo is not None:
            return last_memo
        memo = self._tables.get(obj)
        if memo is None:
            if len(self._tables) >= MAX_OBJECTS:
                self._tables = {}
            memo = lru_cache(maxsize=self._maxsize)(partial(self._function, obj))
            self._tables[obj] = memo
        self._last = (obj, memo)
        return memo

    def cache_clear(self) -> None:
        """Forget every table."""
        self._tables = {}
        self._last = (None, None)


class LastPairTable:
    """A dict of results for the (first, second) object pair of the previous call, found by
    identity: a forecast asks a memo keyed on the same model and strategy objects dozens of
    times, and hashing those pydantic specs costs more than the lookup saves. A new pair
    starts an empty table (the caller's own memo, keyed by equality, fills it).

    Thread-safe: the (first, second, table) triple is one tuple, replaced in one assignment;
    a table holds values for its own pair only."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[object, object, dict[Any, Any]] = (None, None, {})

    def table(self, first: object, second: object) -> dict[Any, Any]:
        last_first, last_second, table = self._last
        if last_first is first and last_second is second and first is not None:
            return table
        table = {}
        self._last = (first, second, table)
        return table


def content_key(value: object) -> Hashable:
    """A hashable key equal for equal inputs: a numpy array's shape, dtype and a 128-bit
    BLAKE2b digest of its bytes (two arrays with the same numbers give the same key; a key
    costs 16 bytes whatever the array's size), any other (hashable) value itself."""
    if isinstance(value, np.ndarray):
        digest = hashlib.blake2b(np.ascontiguousarray(value).data, digest_size=16).digest()
        return (value.shape, value.dtype.str, digest)
    return cast(Hashable, value)


class ArrayContentMemo:
    """``memo(*args)`` -> ``function(*args)``, remembered by the arguments' contents
    (``content_key``) for functions of numpy arrays, which ``lru_cache`` cannot hash.

    The bulk search asks the same array-valued questions of many blocks (a block's
    data-parallel collectives depend on its rows and stage parameters, which the blocks of
    each recompute and schedule choice share): the value comes back as the array computed the
    first time, read-only. Past ``maxsize`` keys the oldest is dropped (insertion order).
    Arguments of more than ``max_elements`` numbers are not remembered (their keys would cost
    memory, and their evaluation is array work, not the per-call overhead a memo saves).
    Thread-safe for readers and writers of whole entries (dict operations are atomic)."""

    __slots__ = ("_function", "_maxsize", "_max_elements", "_table")

    def __init__(self, function: Callable[..., Any], maxsize: int,
                 max_elements: int = 4096) -> None:
        self._function = function
        self._maxsize = maxsize
        self._max_elements = max_elements
        self._table: dict[Hashable, Any] = {}

    def __call__(self, *args: object) -> Any:
        if any(isinstance(a, np.ndarray) and a.size > self._max_elements for a in args):
            return self._function(*args)
        key = tuple(content_key(a) for a in args)
        found = self._table.get(key, _MISSING)
        if found is _MISSING:
            found = self._function(*args)
            if isinstance(found, np.ndarray):
                found.flags.writeable = False  # shared by later callers
            if len(self._table) >= self._maxsize:
                self._table.pop(next(iter(self._table)), None)
            self._table[key] = found
        return found

    def cache_clear(self) -> None:
        """Forget every value."""
        self._table = {}


_MISSING = object()
"""Marks a key ``ArrayContentMemo`` has not seen (a stored value may be None)."""
