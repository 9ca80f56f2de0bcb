"""Watch a search's progress from outside the call: a per-thread observer of ``search_strategies``.

``search_strategies(progress=...)`` reports ``(done, total)`` to its caller. A caller that runs
the ``perfcast search`` command instead (``perfcast serve`` runs the CLI in-process, so its
answer is the command's own ``--json``) cannot pass that argument; it wraps the run in
``watching(callback)`` and the search also reports to ``callback``. The observer is per thread
(``threading.local``): requests a server runs side by side each see their own search, and a
search with no watcher pays one attribute lookup.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Progress = Callable[[int, int], None]
"""``progress(done, total)``: strategies evaluated so far, of ``total``."""

_LOCAL = threading.local()


@contextmanager
def watching(callback: Progress) -> Iterator[None]:
    """Searches this thread runs inside the block also report to ``callback``."""
    previous = getattr(_LOCAL, "callback", None)
    _LOCAL.callback = callback
    try:
        yield
    finally:
        _LOCAL.callback = previous


def observed(progress: Progress | None) -> Progress | None:
    """``progress`` joined with this thread's watcher (None when there is neither)."""
    watcher: Progress | None = getattr(_LOCAL, "callback", None)
    if watcher is None or progress is None:
        return progress if watcher is None else watcher

    def both(done: int, total: int) -> None:
        progress(done, total)
        watcher(done, total)

    return both
