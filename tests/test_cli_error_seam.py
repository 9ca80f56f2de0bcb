"""The CLI's usage-error seam (``cli.errors.usage_error_message``): typer's vendored click
stays inside ``perfcast.cli``, and nothing outside it imports the CLI's private names."""

from __future__ import annotations

import re
from pathlib import Path

from typer._click import exceptions as click_errors

from perfcast.cli.errors import usage_error_message

SRC = Path(__file__).resolve().parents[1] / "src" / "perfcast"


def test_usage_error_is_one_line_with_the_on_off_hint() -> None:
    exc = click_errors.UsageError("Got unexpected extra argument\n (true)")
    assert usage_error_message(exc) == ("Got unexpected extra argument (true): on/off options "
                                        "take no value (write --flag or --no-flag)")
    assert usage_error_message(click_errors.UsageError("No such option: --bogus")) == \
        "No such option: --bogus"


def test_other_exceptions_are_not_usage_errors() -> None:
    assert usage_error_message(ValueError("boom")) is None
    assert usage_error_message(KeyboardInterrupt()) is None


def test_vendored_click_and_private_cli_names_stay_in_the_cli() -> None:
    private_cli = re.compile(r"from perfcast\.cli\.\w+ import .*\b_\w+")
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "cli"):
            continue
        text = path.read_text()
        assert "typer._click" not in text, path
        assert not private_cli.search(text), path
