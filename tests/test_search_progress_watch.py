"""A search reports its progress to a watcher of its thread (how ``perfcast serve`` shows it)."""

from __future__ import annotations

import threading

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.search.progress_watch import observed, watching
from perfcast.search.run import search_strategies
from perfcast.specs import Workload


def _search(**kwargs):
    return search_strategies(load_model("llama-3.2-1b"), load_system("dgx-h100"),
                             Workload(seq_length=4096, global_batch_size=64), 8, top=2, **kwargs)


def test_a_watcher_sees_every_block_of_its_threads_search():
    seen: list[tuple[int, int]] = []
    given: list[tuple[int, int]] = []
    with watching(lambda done, total: seen.append((done, total))):
        result = _search(progress=lambda done, total: given.append((done, total)))
    assert seen == given  # the caller's callback and the watcher get the same reports
    total = result.evaluated
    assert seen[0] == (0, total) and seen[-1] == (total, total) and len(seen) > 2
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:], strict=False))
    assert {t for _, t in seen} == {total}


def test_the_watcher_is_per_thread_and_ends_with_its_block():
    seen: list[tuple[int, int]] = []
    other = threading.Thread(target=_search)
    with watching(lambda done, total: seen.append((done, total))):
        other.start()
        other.join()
    assert seen == []  # another thread's search is not this thread's
    _search()
    assert seen == []
    assert observed(None) is None
