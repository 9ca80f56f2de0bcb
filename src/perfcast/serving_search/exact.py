"""Exact forecast of one deployment: the numbers ``infer-search`` reports.

* Aggregated: ``estimate_serving`` on the ``Strategy`` and the workload ``perfcast infer --gpus N
  --tp .. --pp .. --ep .. --concurrency C`` builds (``InstanceLayout.strategy``,
  ``specs.serving.serving_workload``), so the search and ``infer`` print the same numbers.
* Disaggregated (DistServe, OSDI 2024; Splitwise, ISCA 2024): each decode instance runs
  ``decode_batch`` sequences in decode-only steps priced by the simulation's step-cost tables
  (``serving_step_cost.build_step_cost``; TPOT = mean of the first and last step of a request's
  decode, the simulation's trapezoid rule); the decode pool asks for X = y·b/((O − 1)·TPOT)
  prompts per second; the prefill pool is simulated by ``estimate_serving`` as a Poisson stream
  of X prompts/s producing one token each over x replicas, which gives TTFT (queueing included),
  and as an offline backlog of the same prompts, which gives the prompts/s it sustains at most;
  the KV transfer (``serving_search.transfer``) adds to TTFT. Throughput = min(X, sustained
  prompts/s) × O.

Tokens/s per user = 1 / TPOT (the decode speed one user sees, AIConfigurator's definition).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.estimate.serving import estimate_serving, serving_setup
from perfcast.estimate.serving_step_cost import build_step_cost
from perfcast.kernels.backend import KernelBackendName, KernelBackendRef
from perfcast.serving_search.space import Deployment
from perfcast.serving_search.transfer import kv_transfer_s
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.serving import serving_workload


@dataclass(frozen=True)
class Targets:
    """Service-level targets a deployment must meet (None: no target)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    min_tokens_per_s_per_user: float | None = None

    def met(self, ttft_s, tpot_s, per_user):
        """True where every target holds (scalars or numpy arrays)."""
        ok = (ttft_s == ttft_s) & (tpot_s == tpot_s)  # NaN = no forecast
        if self.ttft_s is not None:
            ok = ok & (ttft_s <= self.ttft_s)
        if self.tpot_s is not None:
            ok = ok & (tpot_s <= self.tpot_s)
        if self.min_tokens_per_s_per_user is not None:
            ok = ok & (per_user >= self.min_tokens_per_s_per_user)
        return ok


@dataclass(frozen=True)
class DeploymentResult:
    """The exact forecast of one deployment."""

    deployment: Deployment
    fits: bool
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float
    kv_transfer_s: float
    """Disaggregated: seconds to move one prompt's KV (0 aggregated)."""
    meets_targets: bool

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.deployment.num_gpus

    @property
    def output_tokens_per_s_per_user(self) -> float:
        return 1.0 / self.tpot_s if self.fits and self.tpot_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {"deployment": self.deployment.to_dict(), "label": self.deployment.label(),
                "fits": self.fits, "meets_targets": self.meets_targets,
                "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
                "output_tokens_per_s": self.output_tokens_per_s,
                "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
                "output_tokens_per_s_per_user": self.output_tokens_per_s_per_user,
                "kv_transfer_s": self.kv_transfer_s}


def _result(dep: Deployment, fits: bool, ttft: float, tpot: float, tokens_per_s: float,
            transfer_s: float, targets: Targets) -> DeploymentResult:
    per_user = 1.0 / tpot if fits and tpot > 0 else 0.0
    met = bool(fits and targets.met(ttft, tpot, per_user))
    return DeploymentResult(deployment=dep, fits=fits, ttft_s=ttft, tpot_s=tpot,
                            output_tokens_per_s=tokens_per_s, kv_transfer_s=transfer_s,
                            meets_targets=met)


def evaluate_aggregated(model: ModelSpec, system: SystemSpec, dep: Deployment, input_len: int,
                        output_len: int, engine: str, targets: Targets, *,
                        calibration: Calibration | None = None,
                        kernel_backend: KernelBackendRef = KernelBackendName.ROOFLINE) -> DeploymentResult:
    """``perfcast infer`` of the deployment (module docstring) with ``calibration`` (None:
    the shipped files) and ``kernel_backend`` (a name or a backend instance)."""
    cal = calibration or load_calibration()
    lay = dep.layout
    workload = serving_workload(concurrency=dep.concurrency, request_rate=None,
                                num_requests=None, input_len=input_len, output_len=output_len)
    report = estimate_serving(model, system.with_num_gpus(dep.num_gpus),
                              lay.strategy(dep.num_gpus), workload, engine=engine,
                              precision=lay.precision, kv_precision=lay.kv_precision,
                              attention_dp=lay.attention_dp,
                              calibration=cal, kernel_backend=kernel_backend)
    return _result(dep, report.fits, report.ttft.mean_s, report.tpot.mean_s,
                   report.output_tokens_per_s, 0.0, targets)


def evaluate_disaggregated(model: ModelSpec, system: SystemSpec, dep: Deployment,
                           input_len: int, output_len: int, engine: str,
                           targets: Targets, *,
                           calibration: Calibration | None = None,
                           kernel_backend: KernelBackendRef = KernelBackendName.ROOFLINE) -> DeploymentResult:
    """Prefill pool simulated, decode pool at steady state (module docstring), with
    ``calibration`` (None: the shipped files) and ``kernel_backend``."""
    assert dep.prefill is not None
    cal = calibration or load_calibration()
    dec, b = dep.layout, dep.decode_batch
    setup = serving_setup(model, system, dec.strategy(dec.gpus), engine=engine,
                          precision=dec.precision, kv_precision=dec.kv_precision,
                          attention_dp=dec.attention_dp,
                          calibration=cal, kernel_backend=kernel_backend)
    nan = float("nan")
    if setup.memory.max_concurrent_seqs(input_len + output_len) < b or output_len < 2:
        return _result(dep, False, nan, nan, 0.0, 0.0, targets)
    cost = build_step_cost(setup.ctx, setup.config, b, input_len + output_len)
    tpot = 0.5 * (cost.decode_s(b, b * input_len) + cost.decode_s(b, b * (input_len + output_len - 2)))
    demand = dep.instances * b / ((output_len - 1) * tpot)
    pre = dep.prefill
    prefill_gpus = pre.gpus * dep.prefill_instances
    pool = system.with_num_gpus(prefill_gpus)
    requests = max(10 * dep.concurrency, 100)
    stream = serving_workload(concurrency=None, request_rate=demand, num_requests=requests,
                              input_len=input_len, output_len=1)
    report = estimate_serving(model, pool, pre.strategy(prefill_gpus), stream, engine=engine,
                              precision=pre.precision, kv_precision=pre.kv_precision,
                              attention_dp=pre.attention_dp,
                              calibration=cal, kernel_backend=kernel_backend)
    if not report.fits:
        return _result(dep, False, nan, nan, 0.0, 0.0, targets)
    backlog = serving_workload(concurrency=None, request_rate=None, num_requests=requests,
                               input_len=input_len, output_len=1)
    capacity = estimate_serving(model, pool, pre.strategy(prefill_gpus), backlog, engine=engine,
                                precision=pre.precision, kv_precision=pre.kv_precision,
                                attention_dp=pre.attention_dp,
                                calibration=cal, kernel_backend=kernel_backend)
    transfer = kv_transfer_s(model, system, pre, dec, input_len)
    served = min(demand, capacity.requests_per_s)
    return _result(dep, True, report.ttft.mean_s + transfer, tpot, served * output_len,
                   transfer, targets)


def evaluate(model: ModelSpec, system: SystemSpec, dep: Deployment, input_len: int,
             output_len: int, engine: str, targets: Targets, *,
             calibration: Calibration | None = None,
             kernel_backend: KernelBackendRef = KernelBackendName.ROOFLINE) -> DeploymentResult:
    """Exact forecast of ``dep`` (aggregated or disaggregated) with ``calibration`` and
    ``kernel_backend``."""
    fn = evaluate_aggregated if dep.mode == "aggregated" else evaluate_disaggregated
    return fn(model, system, dep, input_len, output_len, engine, targets,
              calibration=calibration, kernel_backend=kernel_backend)
