"""Name resolution shared by the model, GPU and system catalogs.

One lookup rule for all three loaders (no per-catalog string hacks):

1. ``normalize_name`` turns a spelling into a key: lower case, Hugging Face organisation prefix
   dropped (``meta-llama/Llama-3.1-405B`` -> ``llama-3.1-405b``), every character other than
   ``a-z``, ``0-9`` and ``.`` removed. So ``Llama 3.1 405B``, ``llama3.1-405b`` and
   ``llama-3.1-405b`` share the key ``llama3.1405b``.
2. A ``NameIndex`` maps the keys of every slug and of its listed aliases to the slug; two entries
   that would share a key are a catalog bug and raise at build time.
3. ``NameIndex.resolve`` tries the full key first, then the key with parenthesised remarks removed
   (``H100 (DGX-H100)`` -> ``h100``), so an alias can still tell ``MI250X (1 GCD)`` from ``MI250X``.
4. Unknown names raise ``InputError(field, name, "unknown ...; did you mean: a, b, c?")`` with
   ``difflib`` close matches (``suggest``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

from perfcast.errors import InputError

_PARENS = re.compile(r"\([^()]*\)")
_NOT_KEY = re.compile(r"[^a-z0-9.]")


def normalize_name(name: str) -> str:
    """Lookup key of a name: lower case, org prefix dropped, only ``[a-z0-9.]`` kept."""
    text = name.strip().lower()
    if "/" in text and not text.startswith((".", "/")):
        text = text.rsplit("/", 1)[1]
    return _NOT_KEY.sub("", text)


def _without_remarks(name: str) -> str:
    """``name`` with parenthesised remarks and anything after a comma removed."""
    text = name
    while _PARENS.search(text):
        text = _PARENS.sub(" ", text)
    return text.split(",", 1)[0]


def suggest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``name`` (difflib ratio on normalized keys).

    Falls back to a looser cutoff so that a misspelling nearly always gets some suggestion.
    """
    by_key: dict[str, str] = {}
    for choice in choices:
        by_key.setdefault(normalize_name(choice), choice)
    key = normalize_name(_without_remarks(name)) or normalize_name(name)
    for cutoff in (0.6, 0.3):
        matches = difflib.get_close_matches(key, list(by_key), n=n, cutoff=cutoff)
        if matches:
            return [by_key[m] for m in matches]
    return []


class NameIndex:
    """Slugs and aliases of one catalog, resolved by ``normalize_name`` keys."""

    def __init__(self, kind: str, aliases: Mapping[str, Iterable[str]]) -> None:
        """``kind`` names the catalog in messages ('model', 'gpu', 'system');
        ``aliases`` maps each slug to its alternative spellings."""
        self.kind = kind
        self.slugs: tuple[str, ...] = tuple(sorted(aliases))
        self._by_key: dict[str, str] = {}
        for slug in self.slugs:
            for spelling in (slug, *aliases[slug]):
                self._add(normalize_name(spelling), slug, spelling)

    def _add(self, key: str, slug: str, spelling: str) -> None:
        other = self._by_key.get(key)
        if other is not None and other != slug:
            raise ValueError(
                f"{self.kind} catalog: spelling {spelling!r} (key {key!r}) names both "
                f"{other!r} and {slug!r}"
            )
        self._by_key[key] = slug

    def find(self, name: str) -> str | None:
        """Slug for ``name``, or None when no slug or alias matches."""
        for candidate in (name, _without_remarks(name)):
            slug = self._by_key.get(normalize_name(candidate))
            if slug is not None:
                return slug
        return None

    def resolve(self, name: str, field: str | None = None) -> str:
        """Slug for ``name``; raises ``InputError`` with close matches when unknown."""
        slug = self.find(name)
        if slug is not None:
            return slug
        hints = suggest(name, self.slugs)
        if hints:
            reason = f"unknown {self.kind}; did you mean: {', '.join(hints)}?"
        else:
            reason = f"unknown {self.kind}; known: {', '.join(self.slugs)}"
        raise InputError(field or self.kind, name, reason)
