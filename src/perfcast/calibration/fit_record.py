"""The ``fit:`` block of a fitted calibration file: what data, backend and method produced it.

Written by ``perfcast calibrate`` (``perfcast.validate.calibration_writer``) at the top of every
file it fits, so a calibration file says which measurements it stands for: the sha256 of each
CSV's bytes, the number of rows used, the kernel backend the rows were forecast with, the date,
and per fitted parameter its value, standard error (from the Jacobian at the optimum) and
whether it sits at a bound of its search range.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ParameterRecord(BaseModel):
    """One fitted parameter as written to a calibration file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float = Field(description="Fitted value (the parameter's own unit).")
    standard_error: float | None = Field(
        description="sqrt of the diagonal of s^2 (J^T J)^-1 at the optimum; None if singular.")
    at_bound: bool = Field(description="True when the value sits at a bound of its range.")
    low: float = Field(description="Lower bound of the search range.")
    high: float = Field(description="Upper bound of the search range.")


class FitRecord(BaseModel):
    """Provenance of a fitted calibration file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str = Field(description="Command that wrote the file.")
    date: str = Field(description="ISO date of the fit.")
    data_sha256: dict[str, str] = Field(description="CSV file name -> sha256 of its bytes.")
    num_rows: int = Field(ge=0, description="Measured rows the fit used.")
    kernel_backend: str = Field(description="Kernel backend the rows were forecast with.")
    loss: str = Field(description="Residual and robust loss minimised.")
    # {}: pydantic copies defaults per instance; default_factory=dict costs each process a
    # ~2.5 ms inspect.signature parse (tests/test_train_process_imports.py).
    parameters: dict[str, ParameterRecord] = Field(
        {}, description="Fitted parameter name -> value and uncertainty.")
