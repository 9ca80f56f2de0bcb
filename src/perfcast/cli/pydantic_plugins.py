"""No pydantic plugin discovery in the ``perfcast`` process unless the user asked for it.

pydantic looks for plugins the first time it builds a validator (``pydantic.plugin._loader``):
it imports ``importlib.metadata`` (with ``email``, ``zipfile``, ``csv``) and reads the entry
points of every installed distribution. perfcast's models use no plugin, and the CLI builds its
validators once per process, so the discovery is pure start-up cost: 3-5 ms of CPU of a
``perfcast train`` process (benchmarks/train_process_time.py, paired runs on 2 shared cores).
Setting ``PYDANTIC_DISABLE_PLUGINS=__all__`` (pydantic's documented switch) before the first
model is built skips it.

A value the user set is left as it is: ``PYDANTIC_DISABLE_PLUGINS=`` (empty) loads every plugin
(e.g. logfire's instrumentation), a comma-separated list disables only those. The library API
(``import perfcast``) never touches the variable; only ``run`` (the console script) does.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
"""The environment variable pydantic reads when it first looks for plugins."""


def skip_pydantic_plugins(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set ``PYDANTIC_DISABLE_PLUGINS=__all__`` in ``environ`` unless it is already set (to
    anything, the empty string included); True when it set it."""
    if PLUGINS_VARIABLE in environ:
        return False
    environ[PLUGINS_VARIABLE] = "__all__"
    return True
