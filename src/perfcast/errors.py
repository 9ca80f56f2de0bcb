"""Error types. Invalid input raises ``InputError``: one line naming the field and value.

A strategy that does not fit in memory is *not* an error; it is a report with ``fits=False``.
"""

from __future__ import annotations


class InputError(ValueError):
    """Input that cannot describe a real run (a field and its value are named in the message)."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={value!r}: {reason}")

    def __reduce__(self):
        """Pickle by the constructor's arguments, so an error raised in a search worker process
        (``search.parallel``) reaches the parent as itself."""
        return (type(self), (self.field, self.value, self.reason))


def format_validation_error(exc: Exception) -> str:
    """One-line message for a pydantic ``ValidationError`` (first error: field, value, reason)."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return str(exc).splitlines()[0]
    parts = []
    for err in errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "input"
        msg = err.get("msg", "invalid value")
        msg = msg.removeprefix("Value error, ")
        value = err.get("input")
        if isinstance(value, dict):
            parts.append(f"{loc}: {msg}")
        else:
            parts.append(f"{loc}={value!r}: {msg}")
    return "; ".join(parts)
