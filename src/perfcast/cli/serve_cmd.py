"""``perfcast serve``: the local web explorer (Starlette + uvicorn, imported only here)."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import CalibrationOption

DEFAULT_PORT = 8765


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
    if calibration is not None and not calibration.is_dir():
        raise InputError("calibration", str(calibration), "is not a directory")
    typer.echo(f"perfcast explorer on http://{host}:{port}/train (Ctrl-C stops it)")
    uvicorn.run(create_app(calibration), host=host, port=port, log_level="warning")
