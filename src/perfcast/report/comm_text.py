"""Terminal rendering of a ``CollectiveEstimate`` (``perfcast comm``)."""

from __future__ import annotations

from perfcast.comm.select import CollectiveEstimate


def render_collective(estimate: CollectiveEstimate, console) -> None:
    """One table: the collective, its algorithm and protocol, time and bandwidths."""
    from rich.table import Table

    table = Table(title=f"{estimate.collective.value} on {estimate.system}", title_justify="left",
                  show_header=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("size", f"{estimate.size_bytes:,.0f} B"),
        ("GPUs", f"{estimate.num_ranks} ({estimate.ranks_per_domain} per scale-up domain "
                 f"x {estimate.num_domains})"),
        ("algorithm / protocol", f"{estimate.algorithm.value} / {estimate.protocol.value}"),
        ("tiers crossed", ", ".join(estimate.tiers_crossed) or "-"),
        ("time", f"{estimate.time_s * 1e6:,.1f} us"),
        ("algbw", f"{estimate.algbw_Bps / 1e9:,.2f} GB/s"),
        ("busbw", f"{estimate.busbw_Bps / 1e9:,.2f} GB/s"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
