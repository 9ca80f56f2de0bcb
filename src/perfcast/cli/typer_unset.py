"""Unset options skip typer's per-parameter validator build (start-up time of every command).

typer 0.29 coerces each parameter's value through a pydantic ``TypeAdapter`` that it builds
the first time the parameter processes a value (``typer.core._TyperParameter.process_value``
-> ``get_runtime_param``), for every parameter of the command, given or not. For a value of
None its coercion returns None (``()`` for a multi-value parameter) without using the adapter
(``typer._coercion.RuntimeParam.coerce``), so building one there is wasted: ``perfcast train``
leaves 24 of its 56 adapter-backed options unset, and their adapters cost ~7 ms of CPU per
process (benchmarks/train_process_time.py).

``process_unset_value`` returns what typer's own path returns for such a value (None, or
``()`` for a multi-value parameter) whenever that path would neither raise (a required
parameter: typer's ``MissingParameter``) nor call anything (a parameter callback); every other
value goes through typer unchanged. ``install`` puts it in front of typer's method once.
"""

from __future__ import annotations

from typing import Any

import typer.core

_TYPER_PROCESS_VALUE = typer.core._TyperParameter.process_value


def process_unset_value(self: typer.core._TyperParameter, ctx: Any, value: Any) -> Any:
    """typer's ``process_value``, except that an unset (None) value of an optional parameter
    without a callback returns at once, building no ``TypeAdapter``."""
    if value is None and not self.required and self.callback is None:
        return () if self.multiple or self.nargs == -1 else None
    return _TYPER_PROCESS_VALUE(self, ctx, value)


def install() -> None:
    """Use ``process_unset_value`` for every typer option and argument (idempotent)."""
    typer.core._TyperParameter.process_value = process_unset_value  # type: ignore[method-assign]
