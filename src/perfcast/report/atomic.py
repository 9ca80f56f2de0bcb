"""Write a file so that it is either the old or the new content, never half of one: write a
temporary file beside it, fsync, then ``os.replace`` (atomic on POSIX). Device files
(``/dev/stdout``, ``/dev/full``) are written directly: there is nothing to replace."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomic(path: Path | str, text: str) -> None:
    """``Path(path).write_text(text)``, atomically for regular files."""
    path = Path(path)
    if path.exists() and not path.is_file():
        path.write_text(text, encoding="utf-8")
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
