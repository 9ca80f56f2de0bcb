"""Framework versions: which release a user or a ground-truth row names, per version scheme.

Frameworks number releases differently, and one framework profile can be reached through
several names that each count their own way (Megatron-Core ``0.13``, NeMo containers ``25.07``,
Megatron-Bridge ``0.2``, torchtitan ``0.2.2``). A ``FrameworkVersion`` is therefore a mapping
from scheme to a tuple of integers; a version range in a profile names the scheme it counts in,
and a version given in another scheme simply does not fall in that range. Dates (``2024-08``)
are a scheme of their own, so a row that gives only a date still selects the defaults of its
time (torchtitan changes defaults on main, between releases).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from perfcast.errors import InputError

VersionScheme = Literal["mcore", "nemo", "bridge", "torchtitan", "llm-foundry", "deepspeed",
                        "torch", "date"]
"""Release numbering: Megatron-Core (``0.13``), NeMo containers (``YY.MM``), Megatron-Bridge
(``0.2``), torchtitan (``0.2.2``), llm-foundry, DeepSpeed, PyTorch, and calendar ``YYYY-MM``."""

_NUMBER = re.compile(r"^v?(\d+(?:\.\d+)*)")
_NEMO_CALVER = re.compile(r"(\d{2})\.(\d{2})")
_DATE = re.compile(r"\b(20\d{2})-(\d{2})(?:-(\d{2}))?\b")
_YEAR = re.compile(r"\b(20\d{2})\b")


def version_tuple(text: str, scheme: VersionScheme) -> tuple[int, ...]:
    """``"0.13"`` -> ``(0, 13)``; ``"2024-08"`` -> ``(2024, 8)`` for the date scheme.

    Raises ``InputError`` naming the text when it is not a version in ``scheme``."""
    text = text.strip()
    if scheme == "date":
        match = _DATE.search(text)
        if match is None:
            raise InputError("framework version", text, "not a date (YYYY-MM[-DD])")
        return tuple(int(part) for part in match.groups() if part is not None)
    match = _NUMBER.match(text)
    if match is None:
        raise InputError("framework version", text, f"not a {scheme} version number (e.g. 0.13)")
    return tuple(int(part) for part in match.group(1).split("."))


def _compare(left: tuple[int, ...], right: tuple[int, ...]) -> int:
    """-1/0/1 comparing two versions on their common prefix (``0.13`` equals ``0.13.1``)."""
    for a, b in zip(left, right, strict=False):
        if a != b:
            return -1 if a < b else 1
    return 0


class VersionBounds(BaseModel):
    """An inclusive version range in one scheme (either end open)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min: str | None = Field(default=None, description="Lowest release included (inclusive).")
    max: str | None = Field(default=None, description="Highest release included (inclusive).")

    def contains(self, version: tuple[int, ...], scheme: VersionScheme) -> bool:
        """True if ``version`` (in ``scheme``) lies within the bounds."""
        if self.min is not None and _compare(version, version_tuple(self.min, scheme)) < 0:
            return False
        return self.max is None or _compare(version, version_tuple(self.max, scheme)) <= 0


@dataclass(frozen=True)
class FrameworkVersion:
    """The release a user or row named, in every scheme it could be read in."""

    parts: dict[VersionScheme, tuple[int, ...]] = field(default_factory=dict)
    """Scheme -> version tuple; empty when no version was given (latest defaults apply)."""
    text: str = ""
    """The version as written, for assumption sentences."""

    def within(self, ranges: dict[VersionScheme, VersionBounds]) -> bool:
        """True if the version lies in any of ``ranges`` whose scheme it was given in."""
        return any(scheme in self.parts and bounds.contains(self.parts[scheme], scheme)
                   for scheme, bounds in ranges.items())


def parse_cli_version(text: str, scheme: VersionScheme) -> FrameworkVersion:
    """The ``@VERSION`` of ``--framework NAME@VERSION``: a date, else a number in ``scheme``."""
    if _DATE.search(text):
        return FrameworkVersion({"date": version_tuple(text, "date")}, text)
    return FrameworkVersion({scheme: version_tuple(text, scheme)}, text)


def find_versions(text: str, alias: str, scheme: VersionScheme, dated: str) -> FrameworkVersion:
    """Versions stated in free text: a number right after ``alias`` (NeMo: any ``YY.MM`` after
    "nemo") in ``text``, and a ``YYYY-MM`` date, else a year, in ``dated`` (a row's
    version_or_date)."""
    parts: dict[VersionScheme, tuple[int, ...]] = {}
    written: list[str] = []
    lowered = text.lower()
    if scheme == "nemo":
        match = re.search(r"nemo[^0-9]{0,3}" + _NEMO_CALVER.pattern, lowered)
        if match:
            parts["nemo"] = (int(match.group(1)), int(match.group(2)))
            written.append(f"{match.group(1)}.{match.group(2)}")
    else:
        match = re.search(re.escape(alias) + r"[\s@]*v?(\d+(?:\.\d+)+)", lowered)
        if match:
            parts[scheme] = version_tuple(match.group(1), scheme)
            written.append(match.group(1))
    date = _DATE.search(dated)
    year = _YEAR.search(dated)
    if date:
        parts["date"] = version_tuple(date.group(0), "date")
        written.append(date.group(0))
    elif year:
        # A year alone ("2021") compares equal to every month of that year (common prefix).
        parts["date"] = (int(year.group(1)),)
        written.append(year.group(1))
    return FrameworkVersion(parts, " / ".join(written))
