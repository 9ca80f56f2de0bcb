"""``perfcast profile``: measure kernels on this machine's GPU into a kernel table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors

INSTALL_HINT = "perfcast profile needs PyTorch: pip install 'perfcast[profile]'"
GPU_HINT = "perfcast profile needs a CUDA or ROCm GPU; none is visible to torch"


@handle_input_errors
def profile_command(
    out: Annotated[Path, typer.Option("--out", help="Kernel table CSV to write.")] = Path(
        "kernel_table.csv"),
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="Catalog GPU of this device (default: from the device name).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A coarser shape grid.")] = False,
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Measure GEMMs, SDPA forward/backward and copies; write a table that
    ``--kernel-backend measured --kernel-table FILE`` interpolates."""
    try:
        import torch
    except ImportError:
        typer.echo(INSTALL_HINT, err=True)
        raise typer.Exit(2) from None
    if not torch.cuda.is_available():
        typer.echo(GPU_HINT, err=True)
        raise typer.Exit(2)
    from perfcast.catalog.gpus import resolve_gpu_name
    from perfcast.profile.measure import measure_rows, write_table

    device_name = torch.cuda.get_device_name(0)
    slug = resolve_gpu_name(gpu or device_name)
    rows = measure_rows(slug, quick=quick)
    write_table(out, device_name, slug, rows)
    if json:
        from perfcast.report.json_out import to_json

        print(to_json({"out": str(out), "gpu": slug, "device": device_name, "rows": len(rows)}))
        return
    typer.echo(f"wrote {len(rows)} kernel times for {slug} ({device_name}) to {out}")
