"""Turn bad input into one line on stderr and exit code 2 (never a traceback)."""

from __future__ import annotations

import functools
import sys

import typer
from typer._click import exceptions as click_errors  # typer vendors its own click

EXIT_BAD_INPUT = 2

_BOOLEAN_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0")


def usage_error_message(exc: BaseException) -> str | None:
    """The one-line message of a command-line usage error (unknown command or option, missing
    or malformed value: typer's click exceptions), with a hint where one helps; None when
    ``exc`` is not a usage error. The one place outside ``app_group`` that knows typer's
    vendored click: the CLI and the web runner (``perfcast serve``) both use it."""
    if not isinstance(exc, click_errors.ClickException):
        return None
    message = " ".join(exc.format_message().split())
    if message.startswith("Got unexpected extra argument") and any(
            f"({w})" in message.lower() for w in _BOOLEAN_WORDS):
        return f"{message}: on/off options take no value (write --flag or --no-flag)"
    return message


def handle_input_errors(command):
    """Decorator: InputError / pydantic ValidationError / a file that cannot be read or written
    -> 'error: ...', exit 2.

    Other exceptions (a plain ``ValueError`` from numpy, say) are bugs, not bad input: they keep
    their traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        from pydantic import ValidationError

        from perfcast.errors import InputError, format_validation_error

        try:
            return command(*args, **kwargs)
        except ValidationError as exc:
            message = format_validation_error(exc)
        except (InputError, FileNotFoundError) as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        except BrokenPipeError:
            raise  # the reader went away (``| head``): typer exits quietly
        except OSError as exc:  # unwritable, too long, a full device: the path and the reason
            where = str(exc.filename) if exc.filename is not None else "file"
            where = where if len(where) <= 80 else f"{where[:60]}...({len(where)} characters)"
            message = f"{where}: {exc.strerror or type(exc).__name__}"
        sys.stderr.write(f"error: {message}\n")
        raise typer.Exit(code=EXIT_BAD_INPUT)

    return wrapper
