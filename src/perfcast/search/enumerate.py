"""Enumerate every valid training strategy for a model, system, GPU count and workload.

Candidate sizes: tp, pp, cp among the divisors of the GPU count (within the constraints), vpp
1..max_vpp, ep among the divisors of the GPU count that divide the experts, expert tp among
the divisors of tp, micro-batch 1..max. Divisibility prunes them before anything is evaluated,
with the rules of
``specs.compat`` and the ``Strategy`` validator applied to each factor (nothing restated
here): tp must suit the heads, pp·vpp the layers, ep the experts, cp the sequence, the global
batch whole micro-batches per DP rank, and ep·etp the tp·cp·dp ranks. Each valid layout is
then crossed with the execution options: sequence parallelism (tp > 1) with and without TP
comm overlap, for MoE rows with EP > 1 each dispatcher the framework runs on the GPU with and
without EP all-to-all overlap (not under full recompute), bf16 and each FP8/FP4 recipe,
ZeRO/FSDP sharding (where there is a DP group to shard over), each CUDA-graph scope the
framework captures, recompute none / selective (each set of modules the framework re-runs,
``search.recompute_sets``) / full with every distinct number of recomputed layers per stage,
the FP8 GEMM scopes the framework runs (FP8 on models with routed experts), and (pp = 1, no
recompute, where the framework offloads) every distinct number of layers whose activations go
to host memory. ``--fix`` /
``--exclude`` pins (``search.pins``) narrow every dimension.

The named framework's own rules (``search.framework_rules``) keep only what it runs: the layer
splits over pp x vpp chunks it accepts, its sharding modes and FP8 recipes, and interleaved
1F1B only where the micro-batches per step are a multiple of pp, and where cp > 1 the
context-parallel exchanges it runs (``--cp-comm-type``; a2a only where the heads and KV heads
per TP rank divide by cp; hierarchical a2a+p2p once per inner level A, 1 < A < cp dividing cp
and the heads, ``--fix/--exclude cp_a2a=A``). The blocking K/V all-gather is left out where the
framework has the ring, unless pinned (``--fix cp_comm_type=all_gather``): it moves the ring's
bytes without the overlap and holds P K/V chunks instead of two, so it is never faster nor
smaller here.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np
from pydantic import ValidationError

from perfcast.calibration.bundle import Calibration
from perfcast.errors import InputError
from perfcast.graph.layer import NODE_DEDUP_DISPATCHERS
from perfcast.graph.param_sharding import layers_per_stage
from perfcast.search.framework_rules import LayoutRules, interleaved_micro_batches_ok
from perfcast.search.pins import Pin
from perfcast.search.recompute_prune import pruned_module_sets
from perfcast.search.recompute_sets import (
    fp8_gemm_scopes,
    module_set_text,
    recompute_module_sets,
)
from perfcast.search.row_table import LayerKeyIndex, RowTable, micro_batches, select_rows
from perfcast.search.space import (
    CUDA_GRAPH_SCOPES,
    DISPATCHERS,
    SearchConstraints,
    StrategyBlock,
    StrategySpace,
)
from perfcast.search.split_merge import SplitGroup, split_groups
from perfcast.specs.compat import check_strategy_for_model, check_workload_for_strategy
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import CP_COMM_TYPES, Strategy
from perfcast.specs.workload import Workload


def _valid(check, **strategy_fields) -> bool:
    """Whether ``Strategy(**strategy_fields)`` exists and passes ``check`` (a compat rule)."""
    try:
        check(Strategy(**strategy_fields))
    except (InputError, ValidationError, ValueError):
        return False
    return True


def _divisors(n: int) -> list[int]:
    """Divisors of ``n`` in increasing order (trial division up to sqrt(n))."""
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _bounded(values, fixed, low, high) -> list[int]:
    return [v for v in values if (fixed is None or v == fixed) and v >= low
            and (high is None or v <= high)]


def _recompute_layers(recompute: str, max_stage_layers: int) -> list[int]:
    """recompute_num_layers values that give distinct results (0 = all layers)."""
    if recompute != "full":
        return [0]
    return list(range(1, max_stage_layers)) + [0]


def enumerate_strategies(model: ModelSpec, system: SystemSpec, num_gpus: int,
                         workload: Workload,
                         constraints: SearchConstraints | None = None,
                         rules: LayoutRules | None = None,
                         options: Strategy | None = None,
                         calibration: Calibration | None = None) -> StrategySpace:
    """All valid strategies on ``num_gpus`` GPUs that the framework of ``rules`` runs (default
    ``DEFAULT_SEARCH_FRAMEWORK``), as blocks for the bulk evaluator. ``options`` holds the
    execution options the search does not enumerate (the framework's defaults);
    ``calibration`` (the shipped one when None) costs the selective module sets pruned at a
    reference shape (``search.recompute_prune``)."""
    c = constraints or SearchConstraints()
    rules = rules or default_rules()
    options = options or Strategy(num_gpus=1)
    n = num_gpus
    divisors = _divisors(n)
    for_model = lambda s: check_strategy_for_model(model, s)  # noqa: E731
    for_workload = lambda s: check_workload_for_strategy(workload, s)  # noqa: E731

    tps = c.allowed("tp", _bounded(divisors, c.tp, c.min_tp, c.max_tp))
    pps = c.allowed("pp", _bounded(divisors if rules.has_pipeline else [1], c.pp, c.min_pp,
                                   c.max_pp))
    cps = c.allowed("cp", _bounded(divisors, c.cp, 1, c.max_cp))
    vpps = c.allowed("vpp", _bounded(range(1, c.max_vpp + 1), c.vpp, 1, None))
    eps = c.allowed("ep", _bounded(divisors, c.ep, 1, c.max_ep) if model.is_moe else [1])
    mbss = c.allowed("micro_batch_size", _bounded(range(1, c.max_micro_batch_size + 1),
                                                  c.micro_batch_size, 1, None))
    raw = len(tps) * len(pps) * len(vpps) * len(cps) * len(eps) * len(mbss)
    raw *= len(tps) if model.is_moe else 1  # expert tp candidates

    tps_ok = [t for t in tps if _valid(for_model, num_gpus=t, tp=t)]
    cps_ok = [x for x in cps if _valid(for_workload, num_gpus=x, cp=x)]
    eps_ok = [e for e in eps if _valid(for_model, num_gpus=e, ep=e, etp=1)]
    recipes = rules.low_precision_recipes(system.gpu, options.fp8_recipe) if c.fp8 else []
    precisions = [(p, r, scope)
                  for p, r in [("bf16", options.fp8_recipe)] + [("fp8", r) for r in recipes]
                  if c.allows("precision", p) and (p == "bf16" or c.allows("fp8_recipe", r))
                  for scope in fp8_gemm_scopes(rules.fp8_gemm_scopes, model, p)
                  if p == "bf16" or c.allows("fp8_gemm_scope", scope)]

    def module_sets(recompute: str, precision: str, recipe: str
                    ) -> list[tuple[tuple[str, ...], ...]]:
        """Selective recompute module sets the framework runs on the model
        (``search.recompute_sets``) under the pins, in one group for the block's last axis,
        those with 'moe' in a second (no EP overlap with it, MLM:TC L3002-3046), each less
        the sets another of its group dominates at a reference shape
        (``search.recompute_prune``); one empty group for other granularities."""
        if recompute != "selective":
            return [()]
        sets = [m for m in recompute_module_sets(rules.recompute_modules,
                                                 options.recompute_modules, model, options,
                                                 precision, recipe)
                if c.allows("recompute_modules", module_set_text(m))]
        groups = [tuple(m for m in sets if ("moe" in m) == with_moe) for with_moe in (False, True)]
        return [pruned_module_sets(model, workload.seq_length, options, precision, recipe, g,
                                   system, calibration) for g in groups if g]
    overlaps = {False: c.allowed("tp_comm_overlap", [False]),
                True: c.allowed("tp_comm_overlap", c.tp_comm_overlap)}
    sp_modes = [sp for sp in c.allowed("sequence_parallel", [False, True]) if overlaps[sp]]
    moe_options = _moe_options(c, rules, options) if model.is_moe else _no_moe_options(c, options)
    shardings = c.allowed("sharding", [x for x in c.sharding if rules.allows_sharding(x)])
    cp_exchanges = [t for t in rules.context_parallel_exchanges()
                    if c.allows("cp_comm_type", t) and (t != "all_gather" or Pin(
                        key="cp_comm_type", value=t) in c.fixed or "p2p" not in
                        rules.context_parallel_exchanges())]

    def exchanges(tp: int, cp: int) -> list[tuple[int, int]]:
        """(CP exchange code, all-to-all ranks) of a (tp, cp) pair: the default where cp = 1
        (no exchange, so pins do not apply), else those the framework runs and the model's
        heads allow (``specs.compat``); a2a+p2p once per inner level (``a2a_levels``)."""
        if cp == 1:
            return [(CP_COMM_TYPES.index(options.cp_comm_type), 1)]
        codes = []
        for t in cp_exchanges:
            if t == "a2a+p2p":
                codes += [(CP_COMM_TYPES.index(t), a) for a in a2a_levels(tp, cp)]
            elif _valid(for_model, num_gpus=tp * cp, tp=tp, cp=cp, cp_comm_type=t):
                codes.append((CP_COMM_TYPES.index(t), cp if t == "a2a" else 1))
        return codes

    def a2a_levels(tp: int, cp: int) -> list[int]:
        """Inner (all-to-all) level sizes of hierarchical a2a+p2p CP for (tp, cp): Megatron-LM
        takes them as ``--hierarchical-context-parallel-sizes A P`` with A x P = cp (arguments.py
        asserts the product and that the option is set with a2a+p2p; parallel_state builds the
        A-rank groups from adjacent CP ranks). The search tries every divisor 1 < A < cp (A = 1
        is the ring, A = cp plain a2a: the same strategies again) whose heads and KV heads per
        TP rank divide by A (``specs.compat``), under ``--fix/--exclude cp_a2a=A``."""
        return [a for a in c.allowed("cp_a2a", _divisors(cp)[1:-1])
                if _valid(for_model, num_gpus=tp * cp, tp=tp, cp=cp, cp_comm_type="a2a+p2p",
                          hierarchical_cp_a2a_size=a)]

    def tp2d_grids(tp: int, cp: int) -> list[int]:
        """2D TP rows to try for (tp, cp): 1, and where the framework runs 2D TP, every divisor
        r > 1 of tp the model allows (``specs.compat``; no CP with 2D TP)."""
        grids = [1] if c.allows("tp2d_rows", 1) else []
        if not rules.tensor_parallel_2d or cp > 1:
            return grids
        return grids + [r for r in c.allowed("tp2d_rows", _divisors(tp)[1:])
                        if _valid(for_model, num_gpus=tp, tp=tp, tp2d_rows=r,
                                  sequence_parallel=True)]

    static_moe = options.moe_pad_expert_input_to_capacity and options.moe_capacity_factor is not None
    scopes = c.allowed("cuda_graphs", rules.graph_scopes(options.cuda_graphs, model.is_moe,
                                                         static_moe))
    scope_codes = [CUDA_GRAPH_SCOPES.index(s) for s in scopes]
    categorical = list(itertools.product(
        c.allowed("recompute", c.recompute), shardings, precisions, sp_modes))

    layer_keys = LayerKeyIndex()
    blocks: list[StrategyBlock] = []

    @functools.cache
    def groups_of(pp: int, vs: tuple[int, ...]) -> list[SplitGroup]:
        """The vpps ``vs`` of ``pp`` stages, grouped into blocks (``search.split_merge``)."""
        return split_groups(model, options, rules, pp, list(vs))

    valid_layouts = 0
    for pp in pps:
        vpp_ok = [v for v in vpps if rules.pipeline_split(model.num_hidden_layers, pp, v)
                  is not None and _valid(for_model, num_gpus=pp, pp=pp, vpp=v,
                                         **rules.split_fields(model.num_hidden_layers, pp, v))]
        rows = []
        for tp, cp in itertools.product(tps_ok, cps_ok):
            if n % (tp * pp * cp):
                continue
            dp = n // (tp * pp * cp)
            mbs_ok = [b for b in mbss
                      if _valid(for_workload, num_gpus=dp, micro_batch_size=b)]
            etps = c.allowed("etp", _divisors(tp)) if model.is_moe else [tp]
            codes = exchanges(tp, cp)
            grids = tp2d_grids(tp, cp)
            for ep, etp in itertools.product(eps_ok, etps):
                if not _valid(lambda s: None, num_gpus=n, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp):
                    continue
                rows += [(tp, cp, ep, etp, b, code, r, a2a) for b in mbs_ok
                         for code, a2a in codes for r in grids]
        if not rows or not vpp_ok:
            continue
        valid_layouts += _count_layouts(list(dict.fromkeys(r[:5] for r in rows)), vpp_ok, pp, n,
                                        workload)
        rows = [r for r in rows if r[6] == 1 or r[0] > 1]
        max_layers = max(layers_per_stage(model.num_hidden_layers, pp))
        schedules = [(name, vs) for name, vs in rules.pipeline_schedules(pp, vpp_ok)
                     if c.allows("schedule", name)]
        tables = {sp: RowTable.build(rows, sp, overlaps[sp], moe_options, precisions,
                                      scope_codes, pp, n, workload, layer_keys)
                  for sp in sp_modes}
        selected = functools.cache(functools.partial(select_rows, tables))
        for (schedule, vs), (recompute, sharding, prec, sp), modules in (
                (a, b, m) for a, b in itertools.product(schedules, categorical)
                for m in module_sets(b[0], b[2][0], b[2][1])):
            offload = c.allowed("offload", rules.offload_layers(max_layers, pp, recompute))
            # No EP overlap with full recompute nor with 'moe' recomputed (MLM:TC L3002-3046)
            rows_of = selected(sp, schedule == "interleaved", sharding != "none",
                               recompute == "full" or any("moe" in m for m in modules))
            if not vs or not offload or not scopes or rows_of is None:
                continue
            shared = block_options(options, recompute, modules[0] if modules else None, prec[2])
            blocks.extend(StrategyBlock(
                num_gpus=n, pp=pp, schedule=schedule, recompute=recompute, sharding=sharding,
                precision=prec[0], sequence_parallel=sp, layer_key=rows_of.keys[prec],
                **rows_of.sizes,
                vpp=np.array(group.vpps, dtype=np.int64).reshape(1, -1, 1),
                recompute_num_layers=np.array(
                    _recompute_layers(recompute, max_layers), dtype=np.int64).reshape(1, 1, -1),
                grad_reduce_dtype=options.grad_reduce_dtype,
                flash_attention=options.flash_attention, fp8_recipe=prec[1],
                cpu_offload_activation_layers=np.array(
                    offload, dtype=np.int64).reshape(1, 1, -1),
                options=with_split(shared, group.splits[0]),
                vpp_options=(tuple(with_split(shared, split) for split in group.splits)
                             if any(split != group.splits[0] for split in group.splits)
                             else ()),
                stage_layers=group.stage_layers,
                module_sets=modules, module_set=np.arange(max(len(modules), 1),
                                                          dtype=np.int64).reshape(1, 1, -1),
            ) for group in groups_of(pp, tuple(vs)))
    return StrategySpace(num_gpus=n, blocks=tuple(blocks), layer_keys=tuple(layer_keys.keys),
                         invalid=raw - valid_layouts, options=options)


@dataclass(frozen=True)
class MoeOptions:
    """The MoE execution options tried for rows with EP > 1 and for rows without."""

    with_ep: tuple[tuple[int, bool], ...]
    """(dispatcher code into ``DISPATCHERS``, EP overlap) pairs where EP > 1."""
    without_ep: tuple[tuple[int, bool], ...]
    """The same where EP = 1: the default dispatcher, no overlap (unless pinned away)."""

    def of(self, ep: int) -> tuple[tuple[int, bool], ...]:
        return self.with_ep if ep > 1 else self.without_ep


def block_options(options: Strategy, recompute: str, modules: tuple[str, ...] | None = None,
                  fp8_gemm_scope: str = "all") -> Strategy:
    """The shared options of a block with ``recompute``, selective recompute ``modules`` and
    ``fp8_gemm_scope``: a selective block re-runs ``modules`` (``search.recompute_sets``; None:
    the framework's selective modules, ``framework_rules.framework_options``: torchtitan's
    per-op SAC, not Megatron's ``core_attn``); other blocks keep ``Strategy``'s default
    modules, which mean nothing without selective recompute (and ``op_sac`` needs it)."""
    update: dict[str, object] = {}
    if fp8_gemm_scope != options.fp8_gemm_scope:
        update["fp8_gemm_scope"] = fp8_gemm_scope
    if recompute == "selective":
        if modules is not None and modules != options.recompute_modules:
            update["recompute_modules"] = modules
    elif options.recompute == "selective":
        update |= {"recompute": "none",
                   "recompute_modules": Strategy.model_fields["recompute_modules"].default}
    return options.model_copy(update=update) if update else options


def with_split(options: Strategy, split: dict[str, bool | str | None]) -> Strategy:
    """``options`` with the pipeline-split fields of a block's vpps
    (``LayoutRules.split_groups``), so the bulk score and ``StrategyBlock.strategy`` run the
    split the framework needs, as the full forecast of the best does (``search.run``)."""
    update = {k: v for k, v in split.items() if getattr(options, k) != v}
    return options.model_copy(update=update) if update else options


def _no_moe_options(c: SearchConstraints, options: Strategy) -> MoeOptions:
    default = DISPATCHERS.index(options.moe_token_dispatcher)
    plain = tuple((default, False) for _ in c.allowed("ep_overlap", [False])
                  if c.allows("moe_token_dispatcher", options.moe_token_dispatcher))
    return MoeOptions(with_ep=(), without_ep=plain)


def _moe_options(c: SearchConstraints, rules: LayoutRules, options: Strategy) -> MoeOptions:
    """Dispatchers the framework runs on the GPU and EP overlap where it has it, under the
    pins."""
    allowed = c.allowed("moe_token_dispatcher", rules.moe_dispatchers(options.moe_token_dispatcher))
    # One dispatcher per distinct cost model (DeepEP and HybridEP send tokens alike,
    # graph.layer.NODE_DEDUP_DISPATCHERS): the first the pins allow stands for both.
    models = {d: "pxn" if d in NODE_DEDUP_DISPATCHERS else d for d in allowed}
    dispatchers = [d for d in allowed if d == next(x for x in allowed if models[x] == models[d])]
    overlaps = c.allowed("ep_overlap", rules.ep_overlaps(options.mtp_num_layers))
    return MoeOptions(
        with_ep=tuple((DISPATCHERS.index(d), o) for d in dispatchers for o in overlaps),
        without_ep=_no_moe_options(c, options).without_ep)


def _count_layouts(rows, vpp_ok, pp: int, n: int, workload: Workload) -> int:
    """Valid (row, vpp) layouts: every row with vpp 1, interleaved ones where the
    micro-batches per step are a multiple of pp."""
    table = np.array(rows, dtype=np.int64)
    dp = n // (table[:, 0] * pp * table[:, 1])
    interleaves = interleaved_micro_batches_ok(micro_batches(workload, table[:, 4], dp), pp)
    num_interleaved = sum(v > 1 for v in vpp_ok)
    return len(rows) * (len(vpp_ok) - num_interleaved) + int(interleaves.sum()) * num_interleaved


def default_rules() -> LayoutRules:
    """Layout rules of ``DEFAULT_SEARCH_FRAMEWORK``."""
    from perfcast.catalog.frameworks import load_framework_profile
    from perfcast.search.framework_rules import DEFAULT_SEARCH_FRAMEWORK

    return LayoutRules.of(load_framework_profile(DEFAULT_SEARCH_FRAMEWORK))
