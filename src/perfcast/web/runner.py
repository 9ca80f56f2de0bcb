"""Run a ``perfcast`` command in-process and keep what it prints: the web API's only engine.

The server calls the CLI itself (the click command tree of ``perfcast.cli.main``), with the
page's arguments and ``--json``: option parsing, ``build_specs``, the estimators, the report's
``to_dict`` and ``to_json`` are the CLI's, so the API's body is byte-identical to
``perfcast <command> ... --json`` and a bad value gets the CLI's one-line message. Output is
caught per thread (``_ThreadStream``), so requests run side by side without a lock.
"""

from __future__ import annotations

import io
import shlex
import sys
import threading
from dataclasses import dataclass
from functools import lru_cache

from perfcast.web.fields import page_fields


@dataclass(frozen=True)
class CliOutcome:
    """What one command printed: its JSON on success, else the CLI's one-line message."""

    exit_code: int
    stdout: str
    message: str
    """The error line without its 'error: ' prefix ('' on success)."""
    field: str
    """The form field the message names ('' when none does)."""
    command_line: str
    """The equivalent shell command (``perfcast train --model ... --json``)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class _ThreadStream(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` stand-in: a thread that called ``capture`` writes to its own
    buffer, every other thread to the real stream."""

    def __init__(self, real) -> None:
        self.real = real
        self.local = threading.local()

    def _target(self):
        return getattr(self.local, "buffer", None) or self.real

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return False

    encoding = "utf-8"


_INSTALL_LOCK = threading.Lock()


def _streams() -> tuple[_ThreadStream, _ThreadStream]:
    """Install the per-thread streams once (idempotent)."""
    with _INSTALL_LOCK:
        if not isinstance(sys.stdout, _ThreadStream):
            sys.stdout = _ThreadStream(sys.stdout)
        if not isinstance(sys.stderr, _ThreadStream):
            sys.stderr = _ThreadStream(sys.stderr)
    return sys.stdout, sys.stderr


@lru_cache(maxsize=1)
def _cli_group():
    import typer

    from perfcast.cli.main import app

    return typer.main.get_command(app)


def command_line(command: str, args: list[str]) -> str:
    """The shell command a user would type for the same forecast."""
    return shlex.join(["perfcast", command, *args, "--json"])


def _field_of(command: str, message: str) -> str:
    """The form field a CLI message names: 'tp=3: ...', "--tp='8_0': ...", "'--tp': ..."."""
    for field in page_fields().get(command, ()):
        flags = [field.flag] + ([field.off_flag] if field.off_flag else [])
        if message.startswith((f"{field.name}=", f"{field.name}:")) or any(
                f"'{flag}'" in message or message.startswith(f"{flag}=") for flag in flags):
            return field.name
    return ""


def run_cli(command: str, args: list[str], extra: tuple[str, ...] = ()) -> CliOutcome:
    """Run ``perfcast <command> <args> <extra> --json`` here; never raises.

    ``extra`` holds server-side options (``--calibration DIR`` of ``perfcast serve``), shown in
    the command line too. A bug in a command (an exception that is not bad input) becomes exit
    code 1 with a one-line message instead of a crashed request."""
    from perfcast.cli.errors import usage_error_message

    argv = [command, *args, *extra, "--json"]
    out, err = _streams()
    stdout, stderr = io.StringIO(), io.StringIO()
    out.local.buffer, err.local.buffer = stdout, stderr
    try:
        code = _cli_group().main(args=argv, prog_name="perfcast", standalone_mode=False)
        message = stderr.getvalue().strip().splitlines()[-1] if code else ""
    except SystemExit as exc:  # a command that exits by itself must not stop the server
        code = exc.code if isinstance(exc.code, int) else 1
        message = stderr.getvalue().strip().splitlines()[-1] if stderr.getvalue().strip() else (
            f"exit code {code}" if code else "")
    except Exception as exc:  # noqa: BLE001 - the server must answer, not crash
        usage = usage_error_message(exc)
        code, message = (2, usage) if usage is not None else (
            1, f"internal error: {type(exc).__name__}: {exc}".splitlines()[0])
    finally:
        out.local.buffer = err.local.buffer = None
    code = code if isinstance(code, int) else 0
    message = message.removeprefix("error: ")
    return CliOutcome(exit_code=code, stdout=stdout.getvalue() if code == 0 else "",
                      message=message, field=_field_of(command, message) if message else "",
                      command_line=command_line(command, [*args, *extra]))
