"""Checks on output paths before any work is done: a bad ``--out``/``--plot``/``--trace``/
``--report`` is a one-line error (``InputError``) up front, not a traceback after a long run.

A full device (``/dev/full``) can only be found by writing; ``perfcast.cli.errors`` turns that
``OSError`` into one line as well.
"""

from __future__ import annotations

import os
from pathlib import Path

from perfcast.errors import InputError

MAX_PATH_BYTES = 4096
"""Longest path Linux accepts (PATH_MAX, <linux/limits.h>)."""


def _check_length(field: str, path: Path) -> None:
    if len(os.fsencode(path)) >= MAX_PATH_BYTES:
        raise InputError(field, f"{str(path)[:40]}...", f"path longer than {MAX_PATH_BYTES} bytes")
    if any(len(os.fsencode(part)) > 255 for part in path.parts):
        raise InputError(field, f"{str(path)[:40]}...", "a path component is longer than 255 bytes")


def check_output_file(field: str, path: Path | None) -> None:
    """``path`` can be written as a file: its folder exists, and it is not a folder."""
    if path is None:
        return
    _check_length(field, path)
    if path.is_dir():
        raise InputError(field, str(path), "is a directory; give a file name")
    parent = path.parent
    if not parent.is_dir():
        raise InputError(field, str(path), f"directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK) and not (path.exists() and os.access(path, os.W_OK)):
        raise InputError(field, str(path), f"directory {str(parent)!r} is not writable")


def check_output_dir(field: str, path: Path | None) -> None:
    """``path`` is, or can be created as, a folder for plot files (no file in the way; a name
    with a file suffix such as ``c.txt`` is taken for a mistake)."""
    if path is None:
        return
    _check_length(field, path)
    if path.exists() and not path.is_dir():
        raise InputError(field, str(path), "exists and is not a directory")
    if not path.exists() and path.suffix:
        raise InputError(field, str(path), "is a directory for the plot files; give a name "
                         f"without a file suffix (not {path.suffix!r})")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(field, str(path), f"{str(existing)!r} is not a directory")
    if not os.access(existing, os.W_OK):
        raise InputError(field, str(path), f"directory {str(existing)!r} is not writable")
