"""The cheapest change that makes a training configuration fit in GPU memory.

A configuration that does not fit is a result, not an error (DESIGN.md); this names what to
change. Candidates are the memory levers practitioners reach for, each a Megatron-LM flag:
shard the optimizer (``--use-distributed-optimizer``), keep Adam moments in bf16
(``--use-precision-aware-optimizer``), FP8 parameters (``--fp8-param-gather``), sequence
parallelism, selective recompute and its modules, full recompute, a smaller micro-batch, and
twice the pipeline, tensor or expert parallelism on the same GPUs. Every single change, then
every pair, is estimated with the same ``estimate_memory`` / ``estimate_training``; among those
that fit, the one with the shortest forecast step is "the cheapest" (time is what memory
savings cost: recompute re-runs the forward, more PP adds bubble, more TP adds collectives).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from perfcast.calibration.bundle import Calibration
from perfcast.errors import InputError
from perfcast.estimate.training import estimate_training
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND
from perfcast.memory.estimate import estimate_memory
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

LAYOUT_FIELDS = ("pipeline_layout", "num_layers_in_first_pipeline_stage",
                 "num_layers_in_last_pipeline_stage")


@dataclass(frozen=True)
class FitAdvice:
    """A change that makes the configuration fit, with what it costs."""

    flags: tuple[str, ...]
    """The Megatron-style flags to add or change, e.g. ('--recompute full',)."""
    strategy: Strategy
    peak_bytes: float
    capacity_bytes: float
    step_time_s: float

    @property
    def text(self) -> str:
        return "fits with " + " ".join(self.flags)

    def to_dict(self) -> dict[str, Any]:
        return {"flags": list(self.flags), "text": self.text, "peak_bytes": self.peak_bytes,
                "capacity_bytes": self.capacity_bytes, "step_time_s": self.step_time_s}


def candidate_changes(model: ModelSpec, strategy: Strategy) -> list[tuple[str, dict]]:
    """(flag text, Strategy field updates) of every single memory lever that applies."""
    s = strategy
    out: list[tuple[str, dict]] = []
    if s.sharding_stage == 0 and s.dp * s.cp > 1:
        out.append(("--use-distributed-optimizer", {"distributed_optimizer": True}))
    if not s.precision_aware_optimizer:
        out.append(("--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16",
                    {"precision_aware_optimizer": True, "exp_avg_dtype": "bf16",
                     "exp_avg_sq_dtype": "bf16"}))
    if s.precision == "fp8" and not s.fp8_param:
        sharded = {} if s.sharding_stage else {"distributed_optimizer": True}
        out.append(("--fp8-param-gather", {"fp8_param": True, **sharded}))
    if s.precision == "fp8" and model.is_moe and not s.fp8_moe_act_inputs:
        out.append(("--fp8-moe-act-inputs", {"fp8_moe_act_inputs": True}))
    if s.tp > 1 and not s.sequence_parallel:
        out.append(("--sequence-parallel", {"sequence_parallel": True}))
    if s.recompute == "none":
        out.append(("--recompute selective", {"recompute": "selective"}))
    if s.recompute != "full":
        modules = ["core_attn", "layernorm", "moe_act" if model.is_moe else "mlp"]
        if model.is_mla:
            modules.append("mla_up_proj")
        if s.recompute != "selective" or set(modules) - set(s.recompute_modules):
            out.append((f"--recompute-modules {','.join(modules)}",
                        {"recompute": "selective", "recompute_modules": tuple(modules)}))
        out.append(("--recompute full", {"recompute": "full", "recompute_modules": ("core_attn",),
                                         "recompute_num_layers": None}))
    if s.micro_batch_size > 1:
        out.append((f"--micro-batch-size {s.micro_batch_size // 2}",
                    {"micro_batch_size": s.micro_batch_size // 2}))
    relayout = {f: None for f in LAYOUT_FIELDS} | {
        "account_for_embedding_in_pipeline_split": False,
        "account_for_loss_in_pipeline_split": False}
    out.append((f"--pp {2 * s.pp}", {"pp": 2 * s.pp, **relayout}))
    out.append((f"--tp {2 * s.tp}", {"tp": 2 * s.tp, "sequence_parallel": True,
                                     "etp": s.etp}))
    if model.is_moe:
        out.append((f"--ep {2 * s.ep}", {"ep": 2 * s.ep}))
    return out


def _changed(strategy: Strategy, updates: dict) -> Strategy | None:
    try:
        return Strategy.model_validate({**strategy.model_dump(), **updates})
    except ValueError:
        return None


def fit_advice(model: ModelSpec, system: SystemSpec, strategy: Strategy,
               workload: Workload, kernel_backend: Any = None,
               calibration: Calibration | None = None) -> FitAdvice | None:
    """The fitting change (one lever, else two) with the shortest forecast step; None when
    the configuration already fits or no single change or pair makes it fit. Steps are
    forecast with ``kernel_backend`` and ``calibration`` (the forecast's own; None: the
    default backend and the shipped calibration)."""
    backend = DEFAULT_KERNEL_BACKEND if kernel_backend is None else kernel_backend
    if estimate_memory(model, system, strategy, workload).fits:
        return None
    levers = candidate_changes(model, strategy)
    for size in (1, 2):
        fitting: list[FitAdvice] = []
        for combo in itertools.combinations(levers, size):
            updates: dict = {}
            for _, change in combo:
                updates.update(change)
            candidate = _changed(strategy, updates)
            if candidate is None:
                continue
            try:
                memory = estimate_memory(model, system, candidate, workload)
                if not memory.fits:
                    continue
                step = estimate_training(model, system, candidate, workload, kernel_backend=backend,
                                         calibration=calibration).step_time_s
            except (InputError, ValueError):
                continue
            fitting.append(FitAdvice(flags=tuple(flag for flag, _ in combo), strategy=candidate,
                                     peak_bytes=memory.peak_bytes,
                                     capacity_bytes=memory.capacity_bytes, step_time_s=step))
        if fitting:
            return min(fitting, key=lambda advice: advice.step_time_s)
    return None
