"""Sweeps: the best strategy at every point of a design space (GPU counts, systems, hardware).

Each ``SweepTask`` is one search (``search_strategies``), independent of the others, so a
sweep runs in-process or on Dask with identical rows. Rows are written to the output file
after each task; re-running with the same file skips tasks whose ``task_id`` is already there
(resume). Hardware sensitivity scales one catalog parameter at a time around the catalog
system (one-at-a-time design-space study).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfcast.errors import InputError
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND
from perfcast.search.space import SearchConstraints
from perfcast.specs.hardware import SystemSpec

PEAK_FIELDS = ("peak_fp32_flops", "peak_tf32_flops", "peak_bf16_flops", "peak_fp16_flops",
               "peak_fp8_flops", "peak_fp6_flops", "peak_fp4_flops", "peak_int8_ops")
HARDWARE_PARAMETERS = {
    "peak_flops": ("gpu", PEAK_FIELDS),
    "hbm_bandwidth": ("gpu", ("hbm_bandwidth_Bps",)),
    "hbm_capacity": ("gpu", ("hbm_capacity_bytes", "hbm_usable_bytes")),
    "scale_up_bandwidth": ("system", ("scale_up_bandwidth_Bps",)),
    "scale_out_bandwidth": ("system", ("scale_out_bandwidth_Bps",)),
}
"""``--vary`` names -> the spec fields they scale (every precision's peak for peak_flops)."""


def scaled_system(system: SystemSpec, parameter: str | None, factor: float) -> SystemSpec:
    """``system`` with hardware ``parameter`` multiplied by ``factor`` (None: unchanged)."""
    if parameter is None or factor == 1.0:
        return system
    if parameter not in HARDWARE_PARAMETERS:
        raise InputError("vary", parameter, f"unknown; choose from {sorted(HARDWARE_PARAMETERS)}")
    where, names = HARDWARE_PARAMETERS[parameter]
    spec = system.gpu if where == "gpu" else system
    update = {n: getattr(spec, n) * factor for n in names if getattr(spec, n) is not None}
    if where == "gpu":
        return system.model_copy(update={"gpu": system.gpu.model_copy(update=update)})
    return system.model_copy(update=update)


@dataclass(frozen=True)
class SweepTask:
    """One point of a sweep: search the best strategy there."""

    model: str
    system: str
    num_gpus: int
    global_batch_size: int
    seq_length: int
    parameter: str | None = None
    factor: float = 1.0
    constraints: SearchConstraints = field(default_factory=SearchConstraints)
    kernel_backend: str = DEFAULT_KERNEL_BACKEND.value
    """Kernel time model the search uses (``perfcast.kernels.backend``)."""
    kernel_table: str | None = None
    """Kernel table of the ``measured`` backend (``--kernel-table``); None = shipped one."""
    calibration_dir: str = ""
    """Calibration directory (``perfcast calibrate --out``); empty: the shipped calibration."""

    @property
    def kernels(self) -> str:
        """The backend name, with the table path when one is given."""
        return self.kernel_backend + (f":{self.kernel_table}" if self.kernel_table else "")

    @property
    def task_id(self) -> str:
        vary = f"{self.parameter}={self.factor:g}" if self.parameter else "base"
        calibration = f"|calibration={self.calibration_dir}" if self.calibration_dir else ""
        return (f"{self.model}|{self.system}|{self.num_gpus}|{self.global_batch_size}|"
                f"{self.seq_length}|{vary}|kernels={self.kernels}{calibration}")

    def backend(self):
        """The backend name, or a measured backend over ``kernel_table``."""
        if self.kernel_table is None:
            return self.kernel_backend
        from perfcast.kernels.measured import measured_backend_for_table

        return measured_backend_for_table(self.kernel_table)


def sweep_tasks(model: str, systems: Sequence[str], gpu_counts: Sequence[int],
                global_batch_size: int, seq_length: int, scaling: str = "strong",
                vary: dict[str, Sequence[float]] | None = None,
                constraints: SearchConstraints | None = None,
                kernel_backend: str = DEFAULT_KERNEL_BACKEND.value,
                kernel_table: str | None = None,
                calibration_dir: str = "") -> list[SweepTask]:
    """Tasks over systems × GPU counts (× each hardware factor, one parameter at a time), each
    searched with ``kernel_backend`` and the calibration in ``calibration_dir`` (empty: shipped).

    Strong scaling keeps the global batch; weak scaling grows it with the GPU count
    (global batch per GPU fixed at that of the smallest count).
    """
    if scaling not in ("strong", "weak"):
        raise InputError("scaling", scaling, "choose 'strong' or 'weak'")
    smallest = min(gpu_counts)
    variations = [(None, 1.0)] + [(p, f) for p, fs in (vary or {}).items() for f in fs if f != 1]
    tasks = []
    for system in systems:
        for gpus in gpu_counts:
            gbs = (global_batch_size if scaling == "strong"
                   else global_batch_size * gpus // smallest)
            for parameter, factor in variations:
                tasks.append(SweepTask(model, system, gpus, gbs, seq_length, parameter, factor,
                                       constraints or SearchConstraints(), kernel_backend,
                                       kernel_table, calibration_dir))
    return tasks


def run_task(task: SweepTask) -> dict:
    """The best strategy at ``task``'s point as one flat row (NaN metrics when none fits)."""
    from perfcast.calibration.bundle import load_calibration
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.search.run import search_strategies
    from perfcast.specs.workload import Workload

    system = scaled_system(load_system(task.system, num_gpus=task.num_gpus), task.parameter,
                           task.factor)
    workload = Workload(seq_length=task.seq_length, global_batch_size=task.global_batch_size)
    result = search_strategies(load_model(task.model), system, workload, task.num_gpus,
                               task.constraints, top=1, kernel_backend=task.backend(),
                               calibration=load_calibration(task.calibration_dir or None))
    row = {"task_id": task.task_id, "model": task.model, "system": task.system,
           "num_gpus": task.num_gpus, "global_batch_size": task.global_batch_size,
           "seq_length": task.seq_length, "parameter": task.parameter or "",
           "factor": task.factor, "kernel_backend": task.kernels,
           "evaluated": result.evaluated, "feasible": result.feasible}
    if not result.best:
        return row | {"tokens_per_s_per_gpu": float("nan"), "step_time_s": float("nan")}
    best = result.best[0].to_dict()
    row |= {k: best[k] for k in ("tokens_per_s_per_gpu", "step_time_s", "memory_bytes", "mfu")}
    row |= {f"strategy_{k}": v for k, v in best["strategy"].items()
            if k in ("tp", "pp", "vpp", "cp", "ep", "dp", "micro_batch_size", "recompute",
                     "sequence_parallel", "zero_stage", "fsdp", "distributed_optimizer",
                     "precision")}
    row |= {f"time_{k}_s": v for k, v in best["breakdown_s"].items()}
    return row


def read_rows(path: Path) -> list[dict]:
    """Rows already in a sweep output file (none when it does not exist)."""
    import pandas as pd

    if not path.exists():
        return []
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    return frame.to_dict("records")


def write_rows(rows: list[dict], path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


def run_sweep(tasks: Sequence[SweepTask], out: Path | None = None, engine: str = "local",
              scheduler: str | None = None, workers: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Run ``tasks`` (skipping those already in ``out``), writing ``out`` after each task.

    Returns every row in task order. ``engine='dask'`` maps tasks on a Dask cluster: the one at
    ``scheduler``, or a local one with ``workers`` processes.
    """
    done = read_rows(out) if out is not None else []
    finished = {row["task_id"] for row in done}
    todo = [t for t in tasks if t.task_id not in finished]
    rows = list(done)

    def record(row: dict) -> None:
        rows.append(row)
        if out is not None:
            write_rows(rows, out)
        if progress is not None:
            progress(len(rows), len(tasks))

    if engine == "dask":
        _run_dask(todo, record, scheduler, workers)
    elif engine == "local":
        for task in todo:
            record(run_task(task))
    else:
        raise InputError("engine", engine, "choose 'local' or 'dask'")
    order = {t.task_id: i for i, t in enumerate(tasks)}
    rows.sort(key=lambda r: order.get(r["task_id"], len(order)))
    if out is not None:
        write_rows(rows, out)
    return rows


DASK_MISSING = "Dask is not installed: pip install 'perfcast[dask]'"


def _run_dask(tasks, record, scheduler: str | None, workers: int | None) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InputError("engine", "dask", DASK_MISSING) from None
    if scheduler:
        client, cluster = Client(scheduler), None
    else:
        cluster = LocalCluster(n_workers=workers or 1, threads_per_worker=1,
                               processes=bool(workers and workers > 1))
        client = Client(cluster)
    try:
        for future in as_completed(client.map(run_task, tasks, pure=False)):
            record(future.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
