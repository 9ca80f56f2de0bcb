"""Sweeps: the best strategy at every point of a design space (GPU counts, systems, hardware).

Each ``SweepTask`` is one search (``search_strategies``), independent of the others, so a
sweep runs in-process or on Dask with identical rows. Each row is on disk as soon as its task
finishes, without rewriting earlier rows (``sweep_store``); re-running with the same file
skips tasks whose ``task_id`` is already there (resume), and duplicate tasks run once.
Hardware sensitivity scales one catalog parameter at a time around the catalog system
(one-at-a-time design-space study).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar, cast

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


STRATEGY_COLUMNS = ("tp", "pp", "vpp", "cp", "ep", "dp", "micro_batch_size", "recompute",
                    "sequence_parallel", "zero_stage", "fsdp", "distributed_optimizer",
                    "precision")
METRIC_COLUMNS = ("tokens_per_s_per_gpu", "step_time_s", "memory_bytes", "mfu")


def row_columns() -> tuple[str, ...]:
    """Every column of a sweep row, in file order (the same for every row: NaN where a point
    has no feasible strategy)."""
    from dataclasses import fields

    from perfcast.estimate.training_report import StepBreakdown

    base = ("task_id", "model", "system", "num_gpus", "global_batch_size", "seq_length",
            "parameter", "factor", "kernel_backend", "evaluated", "feasible")
    times = tuple(f"time_{f.name}" for f in fields(StepBreakdown))
    return base + METRIC_COLUMNS + tuple(f"strategy_{k}" for k in STRATEGY_COLUMNS) + times


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
    row |= {c: float("nan") for c in row_columns() if c not in row}
    if not result.best:
        return row
    best = result.best[0].to_dict()
    row |= {k: best[k] for k in METRIC_COLUMNS}
    row |= {f"strategy_{k}": v for k, v in best["strategy"].items() if k in STRATEGY_COLUMNS}
    row |= {f"time_{k}_s": float(v) for k, v in best["breakdown_s"].items()}
    return row


def json_row(row: dict) -> dict:
    """A sweep row for ``--json``: the file columns plus ``peak_memory_bytes``, the key every
    command's JSON uses for peak memory per GPU (an alias of ``memory_bytes``, kept out of the
    CSV/Parquet columns so that files written before it still resume)."""
    out = {}
    for key, value in row.items():
        out[key] = value
        if key == "memory_bytes":
            out["peak_memory_bytes"] = value
    return out


def read_rows(path: Path) -> list[dict]:
    """Complete rows already in a sweep output file (none when it does not exist)."""
    from perfcast.search.sweep_store import open_store

    return open_store(path, row_columns()).load()


class _Task(Protocol):
    """What ``run_sweep`` needs of a task: a stable id (training or serving sweep task)."""

    @property
    def task_id(self) -> str: ...


TaskT = TypeVar("TaskT", bound=_Task)


def run_sweep(tasks: Sequence[TaskT], out: Path | None = None, engine: str = "local",
              scheduler: str | None = None, workers: int | None = None,
              progress: Callable[[int, int], None] | None = None,
              run: Callable[[TaskT], dict] | None = None,
              columns: tuple[str, ...] | None = None) -> list[dict]:
    """Run ``tasks`` once each (skipping those already in ``out``), each row stored durably
    as it finishes (``sweep_store``).

    Returns every row in task order. ``engine='dask'`` maps tasks on a Dask cluster: the one at
    ``scheduler``, or a local one with ``workers`` processes. ``run`` turns a task into its row
    and ``columns`` are the row's columns (default: the training search's ``run_task`` and
    columns; serving sweeps pass ``serving_search.sweep.run_serving_task`` and its columns).
    """
    from perfcast.search.sweep_store import open_store

    run = run or cast(Callable[[TaskT], dict], run_task)
    tasks = list({t.task_id: t for t in tasks}.values())
    store = open_store(out, columns or row_columns()) if out is not None else None
    done = store.load() if store is not None else []
    finished = {row["task_id"] for row in done}
    todo = [t for t in tasks if t.task_id not in finished]
    rows = list(done)

    def record(row: dict) -> None:
        if store is not None:
            store.append(row)
        rows.append(row)
        if progress is not None:
            progress(len(rows), len(tasks))

    if engine == "dask":
        _run_dask(todo, record, scheduler, workers, run)
    elif engine == "local":
        for task in todo:
            record(run(task))
    else:
        raise InputError("engine", engine, "choose 'local' or 'dask'")
    order = {t.task_id: i for i, t in enumerate(tasks)}
    rows.sort(key=lambda r: order.get(r["task_id"], len(order)))
    if store is not None:
        store.finish(rows)
    return rows


DASK_MISSING = "Dask is not installed: pip install 'perfcast[dask]'"


DASK_CONNECT_TIMEOUT_S = 10.0
"""Seconds to reach a Dask scheduler before giving up with a one-line error."""
DASK_NO_WORKER_TIMEOUT_S = 60.0
"""Seconds a sweep waits with no live Dask worker (none started, or all died) before giving up;
a long task on a live worker never times out."""


def _run_dask(tasks, record, scheduler: str | None, workers: int | None, run) -> None:
    try:
        from dask.distributed import Client, LocalCluster, wait
    except ImportError:
        raise InputError("engine", "dask", DASK_MISSING) from None
    if scheduler:
        try:
            client, cluster = Client(scheduler, timeout=f"{DASK_CONNECT_TIMEOUT_S}s"), None
        except (OSError, TimeoutError) as exc:
            raise InputError("scheduler", scheduler, f"no Dask scheduler answered within "
                             f"{DASK_CONNECT_TIMEOUT_S:g} s ({type(exc).__name__})") from None
    else:
        cluster = LocalCluster(n_workers=workers or 1, threads_per_worker=1,
                               processes=bool(workers and workers > 1))
        client = Client(cluster)
    try:
        _collect(client, client.map(run, tasks, pure=False), record, wait)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _collect(client, futures, record, wait, poll_s: float = 1.0) -> None:
    """Record each future's row as it completes; give up after ``DASK_NO_WORKER_TIMEOUT_S``
    with no live worker."""
    import time

    pending, idle_since = set(futures), None
    while pending:
        try:
            done, pending = wait(list(pending), timeout=poll_s, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        for future in done:
            record(future.result())
        if done:
            idle_since = None
            continue
        if client.scheduler_info(n_workers=-1).get("workers"):
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > DASK_NO_WORKER_TIMEOUT_S:
            raise InputError("engine", "dask", f"no live Dask worker for "
                             f"{DASK_NO_WORKER_TIMEOUT_S:g} s; {len(pending)} tasks not run "
                             "(rows finished so far are kept in --out)")
