"""Terminal rendering of a leave-one-source-out cross-validation (shown before the in-sample
validation, which is labelled as such)."""

from __future__ import annotations

from perfcast.validate.cross_validate_report import CrossValidationOutput


def _pct(value: float) -> str:
    return "-" if value != value else f"{value:.1%}"


def render_cross_validation(output: CrossValidationOutput, console) -> None:
    from rich.table import Table

    table = Table(title="Out of sample: leave-one-source-out cross-validation (each source "
                  "forecast by a calibration refitted without it)", title_justify="left")
    for column in ("rows", "n", "MAPE", "median", "within 10%", "within 20%"):
        table.add_column(column, justify="left" if column == "rows" else "right")
    for name, stats in output.groups:
        table.add_row(name, str(stats.count), _pct(stats.mape), _pct(stats.median_abs_error),
                      _pct(stats.within_10pct), _pct(stats.within_20pct))
    for source, stats in output.validation.stats_by_source():
        table.add_row(f"  {source}", str(stats.count), _pct(stats.mape),
                      _pct(stats.median_abs_error), _pct(stats.within_10pct),
                      _pct(stats.within_20pct))
    console.print(table)
    console.print("[bold]in-sample[/bold] (the calibration in use, fitted on these rows "
                  "when it is the shipped one):")


def render_cross_validation_footer(output: CrossValidationOutput, in_sample, console) -> None:
    """The last lines of ``validate --cross-validate``: the out-of-sample headline, then the
    in-sample one labelled as such (``in_sample``: the in-sample ``ErrorStats``)."""
    overall = dict(output.groups).get("overall")
    if overall is not None:
        console.print(f"cross-validated (leave one source out): MAPE {_pct(overall.mape)}, "
                      f"median {_pct(overall.median_abs_error)}, within 10% "
                      f"{_pct(overall.within_10pct)} over {overall.count} rows", highlight=False)
    band = output.band_coverage
    if band is not None and band.without_band == band.rows.total:
        console.print("80% bands: no source has enough other sources to build one from",
                      highlight=False)
    elif band is not None:
        console.print(f"80% bands built without each source hold {_pct(band.rows.share)} of its "
                      f"held-out rows ({band.rows.total} rows; mean over sources "
                      f"{_pct(band.source_share)}; median half-width "
                      f"{_pct(band.median_half_width)})", highlight=False)
    console.print(f"in-sample (calibration fitted on these rows): MAPE {_pct(in_sample.mape)}, "
                  f"median {_pct(in_sample.median_abs_error)} over {in_sample.count} rows",
                  highlight=False)
