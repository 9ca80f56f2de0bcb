"""Durable sweep output: every finished task is on disk at once, nothing done is rewritten, and
a file cut off by a crash (or SIGKILL) resumes without losing a complete row.

- CSV: append-only. The header is written once; each row is one line, flushed and fsynced
  before the next task starts. On resume a last line without its newline (cut mid-write) is
  cut away and its task recomputed; rows repeated by an earlier crash are merged by task_id.
- Parquet (a file cannot be appended to): one part file per task under ``FILE.parquet.parts/``,
  each written to a temporary name and renamed (``os.replace`` is atomic on POSIX). At the end
  the parts and the previous ``FILE.parquet`` are merged into a temporary file renamed over
  ``FILE.parquet``, and the parts are removed. An unreadable part or main file (cut off before
  this scheme, or by a full disk) is skipped with its tasks recomputed, never fatal.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from pathlib import Path

from perfcast.errors import InputError


def _fsync_replace(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` over ``final`` and make the rename durable (fsync of the folder)."""
    os.replace(tmp, final)
    fd = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unique(rows: Sequence[dict]) -> list[dict]:
    """First row of each task_id (a crash between writing and recording can repeat one)."""
    seen: dict[str, dict] = {}
    for row in rows:
        task_id = row.get("task_id")
        if isinstance(task_id, str) and task_id and task_id not in seen:
            seen[task_id] = row
    return list(seen.values())


class CsvStore:
    """Append-only CSV with the fixed ``columns``."""

    def __init__(self, path: Path, columns: Sequence[str]):
        self.path, self.columns = path, list(columns)

    def load(self) -> list[dict]:
        """Complete rows already in the file (a cut-off last line is removed from the file)."""
        import pandas as pd

        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) != len(data):
            os.truncate(self.path, len(complete))
        if not complete:
            return []
        header = next(csv.reader(io.StringIO(complete.decode("utf-8", "replace"))))
        if header != self.columns:
            raise InputError("out", str(self.path), "holds rows of a different sweep layout "
                             f"({len(header)} columns, expected {len(self.columns)}); "
                             "write to a new file")
        frame = pd.read_csv(io.BytesIO(complete), keep_default_na=False, na_values=[""])
        rows = frame.to_dict("records")
        return _unique([r for r in rows if all(c in r for c in self.columns)])

    def append(self, row: dict) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        with open(self.path, "a", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            if new:
                writer.writerow(self.columns)
            writer.writerow([_cell(row.get(c)) for c in self.columns])
            handle.flush()
            os.fsync(handle.fileno())

    def finish(self, rows: Sequence[dict]) -> None:
        """Nothing to do: every row was appended as it finished."""


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(float(value)) if isinstance(value, float) else str(value)


class ParquetStore:
    """One atomically written part per task, merged into ``path`` at the end."""

    def __init__(self, path: Path, columns: Sequence[str]):
        self.path, self.columns = path, list(columns)
        self.parts = path.with_name(path.name + ".parts")

    def load(self) -> list[dict]:
        rows = self._read(self.path)
        if self.parts.is_dir():
            for part in sorted(self.parts.glob("*.parquet")):
                rows += self._read(part)
        return _unique(rows)

    @staticmethod
    def _read(path: Path) -> list[dict]:
        import pandas as pd

        if not path.is_file():
            return []
        try:
            return pd.read_parquet(path).to_dict("records")
        except Exception:  # noqa: BLE001 - a cut-off or foreign file: its tasks are recomputed
            return []

    def append(self, row: dict) -> None:
        import hashlib

        import pandas as pd

        self.parts.mkdir(exist_ok=True)
        name = hashlib.sha256(str(row["task_id"]).encode()).hexdigest()[:24]
        tmp = self.parts / f".{name}.tmp"
        pd.DataFrame([row], columns=self.columns).to_parquet(tmp, index=False)
        _fsync_replace(tmp, self.parts / f"{name}.parquet")

    def finish(self, rows: Sequence[dict]) -> None:
        import pandas as pd

        tmp = self.path.with_name(f".{self.path.name}.tmp")
        pd.DataFrame(list(rows), columns=self.columns).to_parquet(tmp, index=False)
        _fsync_replace(tmp, self.path)
        if self.parts.is_dir():
            for part in self.parts.iterdir():
                part.unlink()
            self.parts.rmdir()


def open_store(path: Path, columns: Sequence[str]) -> CsvStore | ParquetStore:
    """The store for ``path`` by its suffix (.csv or .parquet)."""
    if path.suffix == ".parquet":
        return ParquetStore(path, columns)
    if path.suffix == ".csv":
        return CsvStore(path, columns)
    raise InputError("out", str(path), "must end in .csv or .parquet")
