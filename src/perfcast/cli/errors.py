"""Turn bad input into one line on stderr and exit code 2 (never a traceback)."""

from __future__ import annotations

import functools
import sys

import typer

EXIT_BAD_INPUT = 2


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
