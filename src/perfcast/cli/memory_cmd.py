"""``perfcast memory``: memory per GPU per pipeline stage."""

from __future__ import annotations

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import RunArgs, run_options


@run_options
@handle_input_errors
def memory_command(args: RunArgs) -> None:
    """Forecast memory per GPU for every pipeline stage and whether it fits."""
    from perfcast.cli.build import build_specs
    from perfcast.memory.estimate import estimate_memory

    specs = build_specs(args)
    report = estimate_memory(specs.model, specs.system, specs.strategy, specs.workload)
    advice = None
    if not report.fits:
        from perfcast.search.fit_advice import fit_advice

        advice = fit_advice(specs.model, specs.system, specs.strategy, specs.workload)
    if args.json:
        from perfcast.report.json_out import to_json

        out = report.to_dict()
        if not report.fits:
            out["fit_advice"] = advice.to_dict() if advice is not None else None
        print(to_json(out))
        return
    from perfcast.report.console import make_console
    from perfcast.report.memory_text import render_fit_advice, render_memory

    console = make_console()
    render_memory(report, console)
    if not report.fits:
        render_fit_advice(advice, console)
