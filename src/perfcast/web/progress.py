"""Progress of the searches the server runs, for the Search page to poll.

The page names its run with a token (header ``X-Perfcast-Progress``); while ``perfcast search``
runs in the request's thread, ``perfcast.search.progress_watch.watching`` reports each evaluated
block here, and ``GET /api/progress/<token>`` answers ``{"done", "total"}`` (strategies). The
board keeps the latest ``MAX_RUNS`` tokens only, so a page that never polls costs nothing.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

TOKEN = re.compile(r"[A-Za-z0-9_-]{8,64}")
"""What a page may name its run (random, from the page; anything else is ignored)."""
MAX_RUNS = 256
"""Runs remembered at once (the oldest is forgotten first)."""


@dataclass(frozen=True)
class RunProgress:
    done: int
    total: int

    def to_dict(self) -> dict[str, int]:
        return {"done": self.done, "total": self.total}


class ProgressBoard:
    """Latest ``RunProgress`` per token, shared by the server's threads."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self._runs: OrderedDict[str, RunProgress] = OrderedDict()
        self._lock = threading.Lock()
        self._max_runs = max_runs

    def reporter(self, token: str):
        """A ``progress(done, total)`` callback that records under ``token``."""
        def report(done: int, total: int) -> None:
            with self._lock:
                self._runs[token] = RunProgress(done, total)
                self._runs.move_to_end(token)
                while len(self._runs) > self._max_runs:
                    self._runs.popitem(last=False)
        return report

    def get(self, token: str) -> RunProgress | None:
        with self._lock:
            return self._runs.get(token)
