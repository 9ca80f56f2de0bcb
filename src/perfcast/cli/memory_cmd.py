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
    if args.json:
        from perfcast.report.json_out import to_json

        print(to_json(specs.with_assumptions(report.to_dict())))
        return
    from perfcast.cli.train_cmd import _verdict
    from perfcast.report.console import make_console
    from perfcast.report.memory_text import render_memory

    console = make_console()
    console.print(_verdict(specs, specs.strategy, report), highlight=False, soft_wrap=True)
    render_memory(report, console)
    if specs.framework is not None:
        from perfcast.report.assumptions_text import render_assumptions

        render_assumptions(specs.framework, specs.assumptions, console)
