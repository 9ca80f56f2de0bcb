"""The root command group: every usage error is one line on stderr with exit code 2.

Click (through typer) prints a usage line, a hint and a boxed message for a bad flag value;
``OneLineErrorGroup`` prints ``error: <message>`` instead, like the commands do for
``InputError`` (``perfcast.cli.errors``). Before parsing it also refuses number tokens that
Python would read but a person would not mean: ``8_0`` (``int('8_0') == 80``) and non-finite
floats (``inf``, ``nan``, ``1e999``), naming the option they were given to.
"""

from __future__ import annotations

import math
import re
import shlex
import sys
import textwrap
from contextvars import ContextVar

import typer
import typer.core
from typer._click import exceptions as click_errors  # typer vendors its own click
from typer._click import formatting as click_formatting
from typer._click.core import Context as ClickContext

from perfcast.cli.errors import EXIT_BAD_INPUT, usage_error_message

_NUMBER_WITH_UNDERSCORE = re.compile(r"^[+-]?[0-9][0-9_]*(\.[0-9_]*)?([eE][+-]?[0-9_]+)?$")
_NON_FINITE = re.compile(r"^[+-]?(inf|infinity|nan)$", re.IGNORECASE)


def _option_of(args: list[str], index: int) -> str:
    """The option a value token at ``index`` belongs to ('--gpus'), or 'argument'."""
    token = args[index]
    if token.startswith("--") and "=" in token:
        return token.split("=", 1)[0]
    if index > 0 and args[index - 1].startswith("-"):
        return args[index - 1]
    return "argument"


def _value_of(token: str) -> str:
    return token.split("=", 1)[1] if token.startswith("--") and "=" in token else token


def _is_non_finite(text: str) -> bool:
    if _NON_FINITE.match(text):
        return True
    try:
        return not math.isfinite(float(text))
    except (ValueError, OverflowError):
        return False


def check_number_tokens(args: list[str]) -> None:
    """Raise ``click_errors.UsageError`` for '8_0'-style numbers and non-finite floats, each element
    of a comma-separated list included."""
    for index, token in enumerate(args):
        for part in _value_of(token).split(","):
            part = part.strip()
            if "_" in part and _NUMBER_WITH_UNDERSCORE.match(part):
                raise click_errors.UsageError(f"{_option_of(args, index)}={part!r}: underscores in "
                                       "numbers are not accepted (write 80, not 8_0)")
            if _is_non_finite(part.partition("=")[2] or part):
                raise click_errors.UsageError(f"{_option_of(args, index)}={part!r}: must be a finite "
                                       "number")


def _flag_type(self, ctx):
    """Help shows no type for on/off flags (``--fsdp/--no-fsdp``): typer 0.29 prints
    ``<bool>``, which reads as if ``--fsdp true`` were accepted."""
    if getattr(self, "is_flag", False):
        return None
    return _display_type_rich(self, ctx)


_display_type_rich = typer.core.TyperOption.display_type_rich
typer.core.TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

_INVOCATION: ContextVar[tuple[str, ...] | None] = ContextVar("perfcast_invocation", default=None)


def invocation_text() -> str | None:
    """The command line of this run (``perfcast train ...``, shell-quoted), for reports; None
    outside the ``perfcast`` command."""
    argv = _INVOCATION.get()
    return None if argv is None else shlex.join(["perfcast", *argv])


class WrappingHelpFormatter(click_formatting.HelpFormatter):
    """Click's help formatter, except that an option line longer than the terminal (many
    aliases, a long choice list) wraps between names instead of running past it; names are
    never cut (issue 22: readable at 80 columns)."""

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        width = max((self.width or 80) - self.current_indent, 20)
        wrapped: list[tuple[str, str]] = []
        for term, text in rows:
            lines = textwrap.wrap(term, width, break_long_words=False, break_on_hyphens=False,
                                  subsequent_indent="  ") if len(term) > width else [term]
            wrapped.extend((line, "") for line in lines[:-1])
            wrapped.append((lines[-1], text))
        super().write_dl(wrapped, col_max, col_spacing)


class WrappingHelpContext(ClickContext):
    formatter_class = WrappingHelpFormatter


class WrappingHelpCommand(typer.core.TyperCommand):
    context_class = WrappingHelpContext


class WrappingHelpGroup(typer.core.TyperGroup):
    context_class = WrappingHelpContext


def use_wrapping_help(app: typer.Typer) -> None:
    """Every command and group of ``app`` (recursively) formats help with
    ``WrappingHelpFormatter``."""
    for command in app.registered_commands:
        if command.cls in (None, typer.core.TyperCommand):
            command.cls = WrappingHelpCommand
    for group in app.registered_groups:
        sub = group.typer_instance
        if sub is not None:
            sub.info.cls = WrappingHelpGroup
            use_wrapping_help(sub)


class OneLineErrorGroup(typer.core.TyperGroup):
    """Root group whose usage errors are ``error: <one line>``, exit 2 (help unchanged)."""

    context_class = WrappingHelpContext

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        argv = list(sys.argv[1:] if args is None else args)
        _INVOCATION.set(tuple(argv))
        try:
            check_number_tokens(argv)
            result = super().main(args=argv, prog_name=prog_name, complete_var=complete_var,
                                  standalone_mode=False, **extra)
        except click_errors.NoArgsIsHelpError as exc:
            if not standalone_mode:
                raise
            typer.echo(exc.ctx.get_help() if exc.ctx else str(exc))
            sys.exit(0)
        except click_errors.ClickException as exc:
            if not standalone_mode:
                raise
            sys.stderr.write(f"error: {usage_error_message(exc)}\n")
            sys.exit(exc.exit_code if exc.exit_code else EXIT_BAD_INPUT)
        except typer.Abort:
            if not standalone_mode:
                raise
            sys.stderr.write("error: aborted\n")
            sys.exit(1)
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)
