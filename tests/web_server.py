"""A ``perfcast serve`` app on a free local port in a background thread (for the web tests)."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    status: int
    text: str
    headers: dict[str, str]

    def json(self):
        return json.loads(self.text)


@dataclass(frozen=True)
class LocalServer:
    base_url: str

    def get(self, path: str, params: dict[str, str] | None = None,
            headers: dict[str, str] | None = None) -> Reply:
        url = self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        request = urllib.request.Request(url, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return Reply(response.status, response.read().decode(),
                             {k.lower(): v for k, v in response.headers.items()})
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read().decode(), {k.lower(): v for k, v in exc.headers.items()})


@contextmanager
def running_server():
    """Yield a ``LocalServer``; the uvicorn server stops when the block ends."""
    import uvicorn

    from perfcast.web.app import create_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the web server did not start"
    try:
        yield LocalServer(f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
