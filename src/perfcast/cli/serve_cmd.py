"""``perfcast serve``: the local web explorer (Starlette + uvicorn, imported only here)."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import CalibrationOption

DEFAULT_PORT = 8765


def _listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (InputError naming the port when it is taken)."""
    from perfcast.errors import InputError

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise InputError("host", host, f"cannot be resolved ({exc.strerror})") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InputError("port", port, f"cannot listen on {host}:{port} "
                         f"({exc.strerror or type(exc).__name__})") from None
    return sock


@handle_input_errors
def serve_command(
    host: Annotated[str, typer.Option("--host", help="Address to listen on (local only by default).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = DEFAULT_PORT,
    calibration: CalibrationOption = None,
) -> None:
    """Start the web explorer: Train, Serve, Search and Compare pages over the CLI's forecasts."""
    from perfcast.errors import InputError

    try:
        import uvicorn

        from perfcast.web.app import create_app
    except ImportError as exc:
        raise InputError("serve", exc.name, "not installed; pip install 'perfcast[web]'") from None
    if calibration is not None:  # a bad directory fails here, once, not on every page
        from perfcast.calibration.bundle import load_calibration

        load_calibration(calibration)
    sock = _listening_socket(host, port)
    typer.echo(f"perfcast explorer on http://{host}:{port}/train (Ctrl-C stops it)")
    server = uvicorn.Server(uvicorn.Config(create_app(calibration), log_level="warning", http="h11",
                                           ws="none", lifespan="off"))
    server.run(sockets=[sock])
