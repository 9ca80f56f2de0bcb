"""``safe_load``: YAML parsed by libyaml's C parser, and parsed once per content per machine.

``yaml.CSafeLoader`` pairs the C scanner/parser with the same Python ``SafeConstructor`` and
resolver as ``yaml.SafeLoader``, so the data is identical (the pure-Python scanner was ~40% of
a ``perfcast train`` process). The parsed data of each distinct text is also kept (``marshal``:
built in, no import cost; data of other types than str/int/float/bool/None/list/dict is not
cached) under the user's cache directory, keyed by a hash of the text (an edited file is a new key), so
later processes skip both the ``yaml`` import and the parse. ``PERFCAST_CACHE_DIR`` moves the
cache; ``PERFCAST_NO_CACHE=1`` turns it off; an unwritable cache is silently skipped.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from pathlib import Path

CACHE_FORMAT = 2
"""Bumped when the cached data's shape changes (part of every key)."""


def _cache_dir() -> Path | None:
    if os.environ.get("PERFCAST_NO_CACHE"):
        return None
    explicit = os.environ.get("PERFCAST_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "perfcast" / "yaml"


class MalformedYaml(ValueError):
    """The text is not valid YAML (the message is PyYAML's)."""


def _parse(text: str):
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise MalformedYaml(str(exc)) from exc


def safe_load(text: str):
    """The Python data of one YAML document (``yaml.safe_load`` semantics; raises
    ``MalformedYaml`` on malformed text, which is never cached)."""
    folder = _cache_dir()
    if folder is None:
        return _parse(text)
    key = hashlib.blake2b(f"{CACHE_FORMAT}\n{text}".encode(), digest_size=16).hexdigest()
    path = folder / f"{key}.marshal"
    try:
        return marshal.loads(path.read_bytes())  # written whole (renamed) by this function
    except (OSError, EOFError, ValueError, TypeError):
        pass
    data = _parse(text)
    try:
        blob = marshal.dumps(data)
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(blob)
        partial.replace(path)
    except (OSError, ValueError):
        pass
    return data
