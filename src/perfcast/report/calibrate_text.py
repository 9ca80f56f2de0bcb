"""Terminal rendering of ``perfcast calibrate``: fitted values with standard errors, flags,
rows per generation, the leave-one-source-out accuracy and the files written."""

from __future__ import annotations

from perfcast.validate.calibrate import CalibrationResult


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def render_calibration(result: CalibrationResult, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    for title, fit in (("training", result.training), ("serving", result.inference)):
        if fit is None:
            continue
        table = Table(title=f"{title} calibration: {fit.rows_used} rows "
                      f"({', '.join(f'{g} {n}' for g, n in fit.rows_by_generation.items())})",
                      title_justify="left")
        for column in ("parameter", "value", "std. error", "range", "note"):
            table.add_column(column, justify="left" if column in ("parameter", "note")
                             else "right")
        for p in fit.parameters:
            note = "at bound" if p.at_bound else ""
            if p.standard_error is None:
                note = (note + "; " if note else "") + "standard error undefined (flat)"
            table.add_row(escape(p.name), _number(p.value), _number(p.standard_error),
                          f"[{p.low:g}, {p.high:g}]", note)
        console.print(table)
        if fit.fallback_generations:
            console.print(f"pooled fit used for: {', '.join(fit.fallback_generations)} "
                          f"(too few rows of their own)")
    if result.routing is not None:
        r = result.routing
        console.print("MoE dropless-routing imbalance: " + (
            f"{r.value:.3f} ± {_number(r.estimate.standard_error)} from {len(r.pairs)} "
            "forced-balance / dropless pairs" if not r.fallback
            else "not fitted (no forced-balance / dropless pair; the base file is kept)"))
    if result.graph_replay is not None:
        g = result.graph_replay
        cv = result.serving_cv
        parts = []
        for p in g.parameters:
            span = cv.parameter_range(p.name) if cv is not None else None
            parts.append(f"{escape(p.name)} {p.value * 1e6:.3g} ± "
                         f"{_number(None if p.standard_error is None else p.standard_error * 1e6)}"
                         " µs" + (f" (folds {span[0] * 1e6:.3g}-{span[1] * 1e6:.3g})"
                                  if span else "") + (" at bound" if p.at_bound else ""))
        console.print(f"graph kernel gap ({g.rows_used} decode rows): " + "; ".join(parts))
    if result.training_cv is not None:
        stats = result.training_cv.stats()
        console.print(f"training leave-one-source-out: MAPE {stats.mape:.1%}, median "
                      f"{stats.median_abs_error:.1%}, within 10% {stats.within_10pct:.0%} "
                      f"({stats.count} rows)")
    bands = result.intervals
    for kind in ("training", "serving"):
        band = getattr(bands, kind) if bands is not None else None
        if bands is not None and band is not None and band.cv_coverage is not None:
            console.print(f"{kind} {bands.level:.0%} bands: {band.cv_coverage:.1%} of held-out "
                          f"rows inside the band built without their source (mean over "
                          f"sources {band.cv_coverage_by_source:.1%}; prior sources "
                          f"{band.prior_sources:g}, tails within {band.within_tail:g} / "
                          f"between {band.between_tail:g})")
    for path in result.written:
        console.print(f"wrote {path}")
