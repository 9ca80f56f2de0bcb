"""Write the exports of one training step: Chrome trace, plots (PNG + SVG), HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfcast.estimate.training_report import TrainingReport

if TYPE_CHECKING:
    from perfcast.calibration.bundle import Calibration


def write_step_exports(report: TrainingReport, model, system, workload, trace: Path | None = None,
                       plot_dir: Path | None = None, html_path: Path | None = None,
                       command: str | None = None, kernel_backend: Any = None,
                       calibration: Calibration | None = None) -> list[Path]:
    """Write what was asked for; returns the files written. The timeline is the simulated
    pipeline phase behind ``report`` (``estimate.training_timeline``); ``command`` (the
    command line) goes into the HTML report. The roofline points are timed with the kernel
    backend and ``calibration`` the report was forecast with (``kernel_backend`` None: the
    report's backend by name; ``calibration`` None: the shipped one)."""
    from perfcast.estimate.training_timeline import stage_operator_points, training_timeline

    timeline = training_timeline(report)
    written: list[Path] = []
    if trace is not None:
        from perfcast.report.trace import write_chrome_trace

        write_chrome_trace(report, timeline, trace)
        written.append(Path(trace))
    if plot_dir is None and html_path is None:
        return written
    from perfcast.report.plots import figure_svg, step_figures, write_plots

    points = stage_operator_points(model, system, report.strategy, workload.seq_length,
                                   report.critical_stage, kernel_backend or report.kernel_backend,
                                   calibration)
    figures = step_figures(report, timeline, points, system.gpu.hbm_bandwidth_Bps)
    if html_path is not None:
        from perfcast.report.html import training_html

        svgs = {name: figure_svg(fig) for name, fig in figures.items()}
        Path(html_path).parent.mkdir(parents=True, exist_ok=True)
        from perfcast.report.atomic import write_text_atomic

        write_text_atomic(html_path, training_html(report, timeline, svgs,
                                                   is_moe=model.is_moe, command=command))
        written.append(Path(html_path))
    if plot_dir is not None:
        written += write_plots(figures, plot_dir)
    else:
        from perfcast.report.plots import _pyplot

        for fig in figures.values():
            _pyplot().close(fig)
    return written
