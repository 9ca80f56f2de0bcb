"""``search_deployments``: the best ways to serve a model on N GPUs under latency targets.

1. Enumerate instance layouts (``space``) and price each once (``screen.layout_table``).
2. Screen every aggregated and (optionally) disaggregated deployment on arrays (``bulk``).
3. Re-score through the exact path (``exact``: ``estimate_serving``, what ``perfcast infer``
   runs) the screened best of each mode (those meeting the targets with ``SCREEN_SLACK``, by
   tokens/s/GPU) and the screened Pareto front of each mode.
4. Rank the re-scored deployments that meet the targets by output tokens/s/GPU (ties: lower
   TTFT); the Pareto front (tokens/s/user vs tokens/s/GPU) is taken over the re-scored ones.
Only exact numbers are reported; the screen only chooses what to re-score.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from perfcast.calibration.bundle import Calibration
from perfcast.kernels.backend import KernelBackendName, KernelBackendRef
from perfcast.search.rank import pareto_front, top_k
from perfcast.serving_search.bulk import ScreenedSet, screen_aggregated, screen_disaggregated
from perfcast.serving_search.exact import DeploymentResult, Targets, evaluate
from perfcast.serving_search.screen import LayoutTable, layout_table
from perfcast.serving_search.space import Deployment, concurrency_levels, instance_layouts
from perfcast.serving_search.transfer import kv_transfer_s
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec

SCREEN_SLACK = 1.5
"""Screened TPOT (and 1/tokens/s/user) may exceed the target by this factor and still be
re-scored: on 40 random deployments each of Llama-3.1-70B/8×H100, DeepSeek-V3/32×H200 and
Mixtral-8x7B/16×H100 (1k/1k) the screened TPOT is 0.7–1.7× the simulated one (10th–90th
percentile 0.98–1.63), so a deployment the screen misjudges still reaches the exact path."""
TTFT_SCREEN_SLACK = 4.0
"""The same for TTFT, which the steady-state screen knows less well (screened/simulated
10th–90th percentile 0.63–3.6 on the same deployments: the simulated closed loop is less
synchronized than the screen's burst)."""
RESCORE_MIN = 24
"""Re-scored deployments per mode, at least (2 × --top when larger)."""
PARETO_RESCORE = 16
"""Points of each mode's screened Pareto front re-scored (evenly spaced along it)."""


@dataclass(frozen=True)
class InferSearchResult:
    """Outcome of one deployment search."""

    model: str
    system: str
    gpu: str
    num_gpus: int
    input_len: int
    output_len: int
    engine: str
    targets: Targets
    disaggregated: bool
    evaluated: int
    """Deployments screened in bulk."""
    feasible: int
    """Screened deployments meeting the targets (screen numbers)."""
    rescored: tuple[DeploymentResult, ...]
    """Every deployment re-scored exactly."""
    best: tuple[DeploymentResult, ...]
    """Re-scored deployments meeting the targets, best first (at most ``top``)."""
    pareto: tuple[DeploymentResult, ...]
    """Re-scored deployments no other beats in both tokens/s/user and tokens/s/GPU."""
    timings_s: dict[str, float] = field(default_factory=dict, compare=False)

    def best_of(self, mode: str) -> DeploymentResult | None:
        """The best re-scored deployment of ``mode`` that meets the targets."""
        ranked = rank([r for r in self.rescored if r.deployment.mode == mode])
        return ranked[0] if ranked else None

    def pareto_of(self, mode: str) -> tuple[DeploymentResult, ...]:
        return pareto_of([r for r in self.rescored if r.deployment.mode == mode])

    def to_dict(self) -> dict:
        modes = ("aggregated", "disaggregated") if self.disaggregated else ("aggregated",)
        best_mode = {m: (b.to_dict() if (b := self.best_of(m)) else None) for m in modes}
        return {
            "model": self.model, "system": self.system, "gpu": self.gpu,
            "num_gpus": self.num_gpus, "input_len": self.input_len,
            "output_len": self.output_len, "engine": self.engine,
            "targets": {"ttft_s": self.targets.ttft_s, "tpot_s": self.targets.tpot_s,
                        "min_tokens_per_s_per_user": self.targets.min_tokens_per_s_per_user},
            "disaggregated": self.disaggregated,
            "evaluated": self.evaluated, "feasible": self.feasible,
            "rescored": len(self.rescored),
            "best": [r.to_dict() for r in self.best],
            "best_by_mode": best_mode,
            "pareto": [r.to_dict() for r in self.pareto],
            "pareto_by_mode": {m: [r.to_dict() for r in self.pareto_of(m)] for m in modes},
        }


def rank(results: list[DeploymentResult]) -> list[DeploymentResult]:
    """Those meeting the targets, by tokens/s/GPU (desc), then TTFT, then fewer GPUs."""
    ok = [r for r in results if r.meets_targets]
    return sorted(ok, key=lambda r: (-r.output_tokens_per_s_per_gpu, r.ttft_s,
                                     r.deployment.num_gpus, r.deployment.label()))


def pareto_of(results: list[DeploymentResult]) -> tuple[DeploymentResult, ...]:
    """Pareto front of the fitting ``results``, by decreasing tokens/s/GPU."""
    fit = [r for r in results if r.fits and np.isfinite(r.ttft_s)]
    if not fit:
        return ()
    x = np.array([r.output_tokens_per_s_per_gpu for r in fit])
    y = np.array([r.output_tokens_per_s_per_user for r in fit])
    return tuple(fit[i] for i in pareto_front(x, y))


def layout_tables(model: ModelSpec, system: SystemSpec, num_gpus: int, input_len: int,
                  output_len: int, engine: str, *,
                  calibration: Calibration | None = None,
                  kernel_backend: KernelBackendRef = KernelBackendName.ROOFLINE) -> list[LayoutTable]:
    """Every valid instance layout of at most ``num_gpus`` GPUs, priced with ``calibration``
    (None: the shipped files) and ``kernel_backend``."""
    levels = np.array(concurrency_levels(), dtype=float)
    tables = [layout_table(model, system, lay, input_len, output_len, levels, engine,
                           calibration=calibration, kernel_backend=kernel_backend)
              for lay in instance_layouts(model, system, num_gpus)]
    return [t for t in tables if t is not None]


def _candidates(screened: ScreenedSet, targets: Targets, keep: int) -> np.ndarray:
    """Indices to re-score: the screened best under relaxed targets and the screened front."""
    m = screened.metrics
    loose = Targets(
        ttft_s=targets.ttft_s * TTFT_SCREEN_SLACK if targets.ttft_s is not None else None,
        tpot_s=targets.tpot_s * SCREEN_SLACK if targets.tpot_s is not None else None,
        min_tokens_per_s_per_user=(targets.min_tokens_per_s_per_user / SCREEN_SLACK
                                   if targets.min_tokens_per_s_per_user is not None else None))
    per_user = m.output_tokens_per_s_per_user
    ok = loose.met(m.ttft_s, m.tpot_s, per_user) & np.isfinite(m.ttft_s)
    score = np.where(ok, m.output_tokens_per_s_per_gpu, -np.inf)
    chosen = top_k(score, keep)
    finite = np.flatnonzero(np.isfinite(m.ttft_s))
    if len(finite):
        front = finite[pareto_front(m.output_tokens_per_s_per_gpu[finite], per_user[finite])]
        step = max(1, int(np.ceil(len(front) / PARETO_RESCORE)))
        chosen = np.concatenate((chosen, front[::step]))
    return np.unique(chosen)


def search_deployments(model: ModelSpec, system: SystemSpec, num_gpus: int, input_len: int,
                       output_len: int, *, targets: Targets | None = None, engine: str = "vllm",
                       disaggregated: bool = False, top: int = 5,
                       calibration: Calibration | None = None,
                       kernel_backend: KernelBackendRef = KernelBackendName.ROOFLINE) -> InferSearchResult:
    """The best deployments of ``model`` on ``num_gpus`` GPUs of ``system`` (module docstring);
    the screen and the exact path both price with ``calibration`` (``perfcast calibrate --out
    DIR``; None: the shipped files) and ``kernel_backend`` (a name or a backend instance, e.g.
    ``MeasuredBackend`` over a user's ``--kernel-table``)."""
    targets = targets or Targets()
    system = system.with_num_gpus(num_gpus)
    t0 = time.perf_counter()
    tables = layout_tables(model, system, num_gpus, input_len, output_len, engine,
                           calibration=calibration, kernel_backend=kernel_backend)
    t1 = time.perf_counter()
    sets = [screen_aggregated(tables, num_gpus, output_len)]
    if disaggregated and output_len >= 2:
        sets.append(screen_disaggregated(
            tables, num_gpus, output_len,
            lambda p, d: kv_transfer_s(model, system, p.layout, d.layout, input_len)))
    t2 = time.perf_counter()
    keep = max(RESCORE_MIN, 2 * top)
    chosen: dict[Deployment, None] = {}
    for s in sets:
        for i in _candidates(s, targets, keep):
            chosen[s.deployment(tables, int(i))] = None
    results = [evaluate(model, system, dep, input_len, output_len, engine, targets,
                        calibration=calibration, kernel_backend=kernel_backend)
               for dep in chosen]
    t3 = time.perf_counter()
    feasible = sum(int(np.count_nonzero(targets.met(
        s.metrics.ttft_s, s.metrics.tpot_s, s.metrics.output_tokens_per_s_per_user)
        & np.isfinite(s.metrics.ttft_s))) for s in sets)
    return InferSearchResult(
        model=model.name, system=system.name, gpu=system.gpu.name, num_gpus=num_gpus,
        input_len=input_len, output_len=output_len, engine=engine, targets=targets,
        disaggregated=disaggregated, evaluated=sum(len(s) for s in sets), feasible=feasible,
        rescored=tuple(results), best=tuple(rank(results)[:top]), pareto=pareto_of(results),
        timings_s={"layouts_s": t1 - t0, "screen_s": t2 - t1, "rescore_s": t3 - t2})
