"""Selective-recompute module sets pruned to the Pareto-efficient ones, when enumerated.

A module set trades forward seconds re-run in backward for activation bytes not stored
(``search.recompute_sets``). Of the sets a framework accepts, many are beaten by another set
that both re-runs fewer seconds and frees more bytes (on DeepSeek-V3, 49-51 of 63 sets at every
layout of sample blocks), and every set multiplies the selective blocks the bulk evaluator
runs. So each candidate set is costed ONCE per model, options and precision at a reference
shape, and only the sets on the (seconds, bytes) Pareto front are enumerated, the framework's
default set always among them.

Reference shape: one GPU (tp = cp = ep = pp = 1), micro-batch 1, the run's sequence length,
the block's precision and FP8 recipe, the search's calibration (``--calibration``; the shipped
one when None) and the default kernel backend. A
set's seconds are ``schedule.stage_time.selective_forward_s`` of its modules over the dense
layers plus the MoE layers (the function ``layer_op_seconds`` and thus ``estimate_training``
and ``search.bulk`` charge), its bytes ``memory.activations.layer_activation_bytes`` over the
layers plus the larger ``recompute_working_bytes`` (what ``memory.estimate`` sums per stage).

Approximation: a set dominated at the reference shape may not be at every layout. The modules'
costs scale together with the tokens per rank (both forward seconds and activation bytes are
linear in micro-batch x sequence / cp, and divide by tp), so the ranking mostly holds; what
moves it is what the reference shape leaves out: the collectives 'moe' and 'core_attn' re-run
under EP and CP (``recompute_comm_s``), sequence-parallel sharding of the norm and dropout
bytes, and the quadratic attention term at other sequence shares. A pinned set
(``--fix recompute_modules=``) is enumerated whether or not it is on the front.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.graph.stage import layer_shape, with_learned_imbalance
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND, get_backend
from perfcast.memory.activations import layer_activation_bytes, recompute_working_bytes
from perfcast.memory.estimate import activation_options
from perfcast.schedule.op_time import compute_op_time_s
from perfcast.schedule.stage_time import selective_forward_s
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy


@dataclass(frozen=True)
class ModuleSetCost:
    """What one selective-recompute module set costs and saves over the model's layers at the
    reference shape (module docstring)."""

    modules: tuple[str, ...]
    recompute_s: float
    """Forward seconds re-run in backward, summed over the layers of one micro-batch."""
    activation_bytes: float
    """Activation bytes stored over the layers of one micro-batch plus the working set."""


def reference_strategy(options: Strategy, precision: str, fp8_recipe: str) -> Strategy:
    """``options`` on one GPU, micro-batch 1, selective recompute, ``precision``/recipe."""
    return options.model_copy(update={
        "num_gpus": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "expert_tp": 1, "vpp": 1,
        "micro_batch_size": 1, "sequence_parallel": False, "tp_comm_overlap": False,
        "recompute": "selective", "precision": precision, "fp8_recipe": fp8_recipe})


def module_set_costs(model: ModelSpec, seq_length: int, options: Strategy, precision: str,
                     fp8_recipe: str, sets: list[tuple[str, ...]], system,
                     calibration: Calibration | None = None) -> list[ModuleSetCost]:
    """``ModuleSetCost`` of each of ``sets`` at the reference shape on ``system``'s GPU, op
    times and routing imbalance from ``calibration`` (the shipped one when None)."""
    from perfcast.search.bulk import layer_group  # the bulk search's memoized op graphs

    cal = calibration or load_calibration()
    backend = cal.with_kernels(get_backend(DEFAULT_KERNEL_BACKEND))
    base = reference_strategy(options, precision, fp8_recipe)
    kinds = [(False, model.num_dense_layers), (True, model.num_moe_layers)]
    layers = []
    for moe, count in kinds:
        if count == 0:
            continue
        strategy = (with_learned_imbalance(base, cal.routing.dropless_load_imbalance.value)
                    if moe else base)
        group = layer_group(model, layer_shape(model, strategy, seq_length, moe))
        times = [compute_op_time_s(op, system, strategy, backend) for op in group.compute]
        layers.append((moe, count, group, times))
    opts = activation_options(model, base)

    def cost(modules: tuple[str, ...]) -> ModuleSetCost:
        o = replace(opts, recompute_modules=modules)
        seconds = sum(count * selective_forward_s(group, modules, times)
                      for _, count, group, times in layers)
        stored = sum(count * float(layer_activation_bytes(model, seq_length, 1, o, moe))
                     for moe, count, _, _ in layers)
        working = max(float(recompute_working_bytes(model, seq_length, 1, o, moe))
                      for moe, _, _, _ in layers)
        return ModuleSetCost(modules, float(seconds), stored + working)

    return [cost(m) for m in sets]


def pareto_efficient(costs: list[ModuleSetCost], keep: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The sets of ``costs`` (in their order) that no other set dominates (re-runs no more
    seconds and stores no more bytes, one of them strictly less), plus ``keep`` if present;
    of sets with equal costs the first is kept."""
    def dominates(a: ModuleSetCost, b: ModuleSetCost) -> bool:
        no_worse = a.recompute_s <= b.recompute_s and a.activation_bytes <= b.activation_bytes
        return no_worse and (a.recompute_s < b.recompute_s
                             or a.activation_bytes < b.activation_bytes)

    kept = []
    for i, c in enumerate(costs):
        tied_earlier = any(o.recompute_s == c.recompute_s
                           and o.activation_bytes == c.activation_bytes for o in costs[:i])
        if c.modules == keep or not (tied_earlier or any(dominates(o, c) for o in costs)):
            kept.append(c.modules)
    return kept


@dataclass(frozen=True, eq=False)
class _SameCalibration:
    """A calibration as a cache key by identity (``Calibration`` holds dicts: unhashable);
    the cache holds it, so its id is not reused while cached."""

    calibration: Calibration | None


def pruned_module_sets(model: ModelSpec, seq_length: int, options: Strategy, precision: str,
                       fp8_recipe: str, sets: tuple[tuple[str, ...], ...], system,
                       calibration: Calibration | None = None) -> tuple[tuple[str, ...], ...]:
    """``sets`` less those dominated at the reference shape under ``calibration`` (the shipped
    one when None), ``options.recompute_modules`` (the framework's default) always kept;
    ``sets`` of one set are returned as they are."""
    if len(sets) < 2:
        return sets
    return _pruned(model, seq_length, options, precision, fp8_recipe, sets, system,
                   _SameCalibration(calibration) if calibration is not None else None)


@functools.lru_cache(maxsize=64)
def _pruned(model: ModelSpec, seq_length: int, options: Strategy, precision: str,
            fp8_recipe: str, sets: tuple[tuple[str, ...], ...], system,
            calibration: _SameCalibration | None) -> tuple[tuple[str, ...], ...]:
    """``pruned_module_sets``, once per process for a model, options, system and calibration
    (a sweep asks again for every task)."""
    costs = module_set_costs(model, seq_length, options, precision, fp8_recipe, list(sets),
                             system, calibration.calibration if calibration else None)
    return tuple(pareto_efficient(costs, tuple(options.recompute_modules)))
