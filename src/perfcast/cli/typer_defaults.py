"""Options left at their defaults skip typer's per-parameter validator (start-up of a command).

typer 0.29 coerces each parameter's value through a pydantic ``TypeAdapter`` that it builds
the first time the parameter processes a value (``typer.core._TyperParameter.process_value``
-> ``get_runtime_param``): for every parameter of the command, given or not. ``perfcast train``
has 56 adapter-backed options (16 ms of CPU for all, pydantic's one-time warm-up included); a
typical command line gives 2 or 3.

Two kinds of value come out of typer's coercion unchanged, so building an adapter for them is
wasted:

- None (an unset option): ``typer._coercion.RuntimeParam.coerce`` returns None, or ``()`` for a
  multi-value parameter, before it touches the adapter (24 of train's options);
- a default (``ParameterSource.DEFAULT``) whose type is exactly the option's annotation, one of
  ``int``, ``float``, ``str`` or an ``Enum``, on an option without ``parser``, ``min`` or ``max``:
  the number adapter validates an int as itself and a float as itself, the string adapter
  returns ``str(value)``, the choice adapter returns an Enum member that is one of its choices
  as it is (``typer._param_types.coerce_cli_choice``) (28 of train's options).

``process_default_value`` returns such a value at once whenever typer's own path would neither
raise (a required parameter: typer's ``MissingParameter``) nor call anything (a parameter
callback); every other value goes through typer unchanged. ``install`` puts it in front of
typer's method. ``perfcast train -m llama-3-8b -g 8`` builds 10 adapters instead of 56; with the
other start-up cuts (``pydantic_plugins``) 11-12 ms of CPU less per process
(benchmarks/train_process_time.py, paired runs).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import typer.core

try:  # typer >= 0.29 vendors click as typer._click
    from typer._click.core import Context, ParameterSource

    _PARAMETER_CLASS = getattr(typer.core, "_TyperParameter", None)
except ImportError:  # pragma: no cover - another layout: install() does nothing
    _PARAMETER_CLASS = None
"""typer 0.29's common class of options and arguments (None in other layouts)."""
_TYPER_PROCESS_VALUE = getattr(_PARAMETER_CLASS, "process_value", None)

_PLAIN_TYPES = (int, float, str)
"""Annotations whose default of exactly that type typer's coercion returns unchanged."""


def _is_plain_default(param: typer.core._TyperParameter, ctx: Context, value: Any) -> bool:
    """Whether ``value`` is ``param``'s default of exactly its plain annotated type."""
    annotation = param.type_descriptor.annotation
    info = param.type_descriptor.parameter_info
    if type(value) is not annotation or param.multiple or param.nargs != 1:
        return False
    if not (annotation in _PLAIN_TYPES or issubclass(annotation, Enum)):
        return False
    if info.parser is not None or info.min is not None or info.max is not None:
        return False
    return ctx.get_parameter_source(param.name or "") is ParameterSource.DEFAULT


def process_default_value(self: typer.core._TyperParameter, ctx: Context, value: Any) -> Any:
    """typer's ``process_value``, except that an unset (None) value or a plain default of an
    optional parameter without a callback returns at once, building no ``TypeAdapter``."""
    if not self.required and self.callback is None:
        if value is None:
            return () if self.multiple or self.nargs == -1 else None
        if _is_plain_default(self, ctx, value):
            return value
    assert _TYPER_PROCESS_VALUE is not None  # install() returns early otherwise
    return _TYPER_PROCESS_VALUE(self, ctx, value)


def install() -> None:
    """Use ``process_default_value`` for every typer option and argument (idempotent). A typer
    without 0.29's ``_TyperParameter.process_value`` is left as it is: the cut is start-up
    time only, never behaviour."""
    if _PARAMETER_CLASS is None or _TYPER_PROCESS_VALUE is None:
        return
    _PARAMETER_CLASS.process_value = process_default_value
