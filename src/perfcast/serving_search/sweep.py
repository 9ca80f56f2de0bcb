"""Serving sweeps: the best deployment (``search_deployments``) at every point of systems × GPU
counts × latency targets, run by the training sweep's engines (``search.sweep.run_sweep``:
in-process or Dask, rows stored durably as they finish, resumable by ``task_id``).

A row holds the point, the counts, and for the best deployment overall and the best of each
mode its label, GPUs, TTFT, TPOT, tokens/s/GPU and tokens/s/user (NaN / "-" where no
deployment meets the targets).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SERVING_KERNEL_BACKEND = "roofline"
"""Kernel backend of a serving sweep when none is named: the serving estimators' own
(``estimate.serving.estimate_serving``, ``perfcast infer-search``)."""
PREFIXES = ("best", "aggregated", "disaggregated")
"""Column groups of a row: the best overall, the best aggregated, the best disaggregated."""
NO_DEPLOYMENT = "-"
"""Deployment label where none meets the targets (survives the CSV round trip, unlike "")."""
METRICS = ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user")


@dataclass(frozen=True)
class ServingSweepTask:
    """One point of a serving sweep: search the best deployment there."""

    model: str
    system: str
    num_gpus: int
    input_len: int
    output_len: int
    ttft_s: float | None = None
    tpot_s: float | None = None
    min_tokens_per_s_per_user: float | None = None
    engine: str = "vllm"
    disaggregated: bool = False
    calibration_dir: str = ""
    """Calibration directory (``perfcast calibrate --out``); empty: the shipped calibration."""
    kernel_backend: str = SERVING_KERNEL_BACKEND
    """Kernel time model (``perfcast.kernels.backend``, ``--kernel-backend``)."""
    kernel_table: str | None = None
    """Kernel table of the ``measured`` backend (``--kernel-table``); None = shipped one."""

    @property
    def kernels(self) -> str:
        """The backend name, with the table path when one is given."""
        return self.kernel_backend + (f":{self.kernel_table}" if self.kernel_table else "")

    @property
    def task_id(self) -> str:
        def show(v: float | None) -> str:
            return "-" if v is None else f"{v:g}"
        calibration = f"|calibration={self.calibration_dir}" if self.calibration_dir else ""
        # the default kernels leave the id as it was (rows written before stay resumable)
        kernels = "" if self.kernels == SERVING_KERNEL_BACKEND else f"|kernels={self.kernels}"
        return (f"serving|{self.model}|{self.system}|{self.num_gpus}|{self.input_len}|"
                f"{self.output_len}|ttft={show(self.ttft_s)}|tpot={show(self.tpot_s)}|"
                f"user={show(self.min_tokens_per_s_per_user)}|{self.engine}|"
                f"disagg={int(self.disaggregated)}{kernels}{calibration}")

    def backend(self):
        """The backend name, or a measured backend over ``kernel_table``."""
        if self.kernel_table is None:
            return self.kernel_backend
        from perfcast.kernels.measured import measured_backend_for_table

        return measured_backend_for_table(self.kernel_table)


def serving_row_columns() -> tuple[str, ...]:
    """Every column of a serving sweep row, in file order."""
    base = ("task_id", "model", "system", "num_gpus", "input_len", "output_len",
            "target_ttft_s", "target_tpot_s", "target_min_tokens_per_s_per_user", "engine",
            "disaggregated", "evaluated", "feasible")
    per = tuple(f"{p}_{c}" for p in PREFIXES for c in ("deployment", "num_gpus", *METRICS))
    return base + per


def serving_sweep_tasks(model: str, systems: Sequence[str], gpu_counts: Sequence[int],
                        input_len: int, output_len: int, ttft_s: Sequence[float | None],
                        tpot_s: Sequence[float | None],
                        min_tokens_per_s_per_user: float | None, engine: str,
                        disaggregated: bool, calibration_dir: str = "",
                        kernel_backend: str = SERVING_KERNEL_BACKEND,
                        kernel_table: str | None = None) -> list[ServingSweepTask]:
    """Tasks over systems × GPU counts × TTFT targets × TPOT targets, priced with the
    calibration in ``calibration_dir`` (empty: shipped) and ``kernel_backend`` (over
    ``kernel_table`` when given)."""
    return [ServingSweepTask(model, system, gpus, input_len, output_len, ttft, tpot,
                             min_tokens_per_s_per_user, engine, disaggregated, calibration_dir,
                             kernel_backend, kernel_table)
            for system in systems for gpus in gpu_counts for ttft in ttft_s for tpot in tpot_s]


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def run_serving_task(task: ServingSweepTask) -> dict:
    """The best deployment at ``task``'s point as one flat row."""
    from perfcast.calibration.bundle import load_calibration
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.serving_search import Targets, search_deployments

    targets = Targets(ttft_s=task.ttft_s, tpot_s=task.tpot_s,
                      min_tokens_per_s_per_user=task.min_tokens_per_s_per_user)
    result = search_deployments(load_model(task.model),
                                load_system(task.system, num_gpus=task.num_gpus),
                                task.num_gpus, task.input_len, task.output_len, targets=targets,
                                engine=task.engine, disaggregated=task.disaggregated, top=1,
                                calibration=load_calibration(task.calibration_dir or None),
                                kernel_backend=task.backend())
    row = {"task_id": task.task_id, "model": task.model, "system": task.system,
           "num_gpus": task.num_gpus, "input_len": task.input_len,
           "output_len": task.output_len, "target_ttft_s": _nan(task.ttft_s),
           "target_tpot_s": _nan(task.tpot_s),
           "target_min_tokens_per_s_per_user": _nan(task.min_tokens_per_s_per_user),
           "engine": task.engine, "disaggregated": task.disaggregated,
           "evaluated": result.evaluated, "feasible": result.feasible}
    picks = {"best": result.best[0] if result.best else None,
             "aggregated": result.best_of("aggregated"),
             "disaggregated": result.best_of("disaggregated") if task.disaggregated else None}
    for prefix, pick in picks.items():
        row[f"{prefix}_deployment"] = pick.deployment.label() if pick else NO_DEPLOYMENT
        row[f"{prefix}_num_gpus"] = pick.deployment.num_gpus if pick else math.nan
        for metric in METRICS:
            row[f"{prefix}_{metric}"] = float(getattr(pick, metric)) if pick else math.nan
    return row
