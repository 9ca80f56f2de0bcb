"""FP8 / MX / NVFP4 training: which GEMMs run in FP8 (FP4), and the cast/scale kernels each
recipe adds.

An FP8 GEMM ``Y[m, n] = X[m, k] · W[k, n]`` needs its operands quantized from BF16 (E4M3 for
X and W, E5M2 or E4M3 for the gradient dY; Micikevicius et al. 2022, "FP8 Formats for Deep
Learning", §3-4). Each operand feeds two GEMMs of the layer, each with its own reduction axis
(Hopper FP8 tensor cores take only the TN layout, so the second use needs a transposed copy):

    X  (m×k): forward (reduces k)  and wgrad dW = Xᵀ·dY (reduces m)
    W  (k×n): forward (reduces k)  and dgrad dX = dY·Wᵀ (reduces n)
    dY (m×n): dgrad   (reduces n)  and wgrad           (reduces m)

Bytes through HBM to quantize a tensor of E elements into L layouts (BF16 in = 2 B/element,
FP8 out = 1 B/element per layout), per recipe:

- ``tensorwise`` (current scaling; torchao float8 README, Transformer Engine
  ``Float8CurrentScaling``): an amax reduction pass (read 2E), then one fused cast-transpose
  kernel (read 2E, write L·E). One fp32 scale per tensor (not counted).
- ``delayed`` (TE ``DelayedScaling``): the scale comes from the amax history of previous
  steps, so the amax pass disappears (the cast records the new amax): read 2E, write L·E.
- ``rowwise`` (torchao ``Float8LinearRecipeName.ROWWISE``): one fp32 scale per row along each
  GEMM's reduction axis; the two layouts scale along different axes, so each is a separate
  quantization from BF16: L·(read 2E + write E) + 4·E/d per layout reducing over d. torchao
  casts with ``torch.amax(x, dim=axiswise_dim)`` and then scales (``float8_scaling_utils.
  hp_tensor_to_float8_dynamic``): along the contiguous axis a row of a few thousand elements
  stays on chip, so amax and cast share one read; along the strided axis (X reduced over the
  m tokens for wgrad, the stored [n, k] weight reduced over n for dgrad) the amax spans the
  whole tensor before any element can be cast, so that layout needs an amax pass of its own
  (+2E; ``strided_amax_bytes``), as the tensorwise amax pass does. X and W are cast to their
  two layouts in different graphs (torchao ``matmul_with_hp_or_float8_args`` saves the BF16
  X and W and casts the second layout in backward), so nothing shares that pass; dY's two
  layouts are both cast in backward, where one read after the amax pass can write both
  (no extra read counted).
- ``rowwise-hp-wgrad`` (torchao ``ROWWISE_WITH_GW_HP``): as rowwise, but the weight-gradient
  GEMM stays BF16 (``gemm_in_fp8``), so X and dY need only their single FP8 layout.
- ``blockwise`` (DeepSeek-V3 report §3.3.2; TE ``Float8BlockScaling``): fp32 scales per 1×128
  tile of activations/gradients (4·E/128 B) and per 128×128 block of weights (4·E/128² B);
  one kernel reads once and writes both layouts: read 2E, write L·(E + scales).
- ``mxfp8`` (OCP Microscaling Formats (MX) Specification v1.0, §5; TE ``MXFP8BlockScaling``):
  one E8M0 (1-byte) scale per 32 consecutive elements along the reduction axis (E/32 B per
  layout); one kernel writes both layouts: read 2E, write L·(E + E/32).
- ``nvfp4`` (NVIDIA, *Pretraining Large Language Models with NVFP4*, arXiv 2509.25149, 2025,
  §3-4; TE ``NVFP4BlockScaling``): every linear-layer GEMM (forward, dgrad, wgrad) runs at the
  FP4 peak on E2M1 operands (0.5 B/element), one E4M3 scale (1 B) per 16 consecutive elements
  of activations and gradients (E/16 B per layout) and per 16×16 block of weights (E/256 B),
  plus one fp32 per-tensor scale from the tensor's amax (not counted). The per-tensor scale is
  current scaling, so like ``tensorwise`` an amax pass precedes the cast: read 2E + read 2E,
  write L·E/2. The wgrad inputs X and dY are quantized for their weight-gradient layout
  (reducing over the m tokens) after a 16-point random Hadamard transform (paper §4.2),
  which the row-wise layout does not take, so that layout is a second quantization from
  BF16 (+2E read; ``rht_layout_bytes``): Transformer Engine's ``NVFP4Quantizer`` runs the
  transform-and-cast of the column-wise layout as a kernel of its own
  (``hadamard_transform_cast_fusion_columnwise``) beside the row-wise cast, and torchao's
  NVFP4 linear quantizes the transposed BF16 tensor for wgrad. Weights take no transform and
  their 16×16 blocks serve both layouts, so one cast writes both. Stochastic rounding of
  gradients runs inside the cast kernel (no extra HBM bytes). The paper's BF16 tail layers
  are not modelled; router, LM head and attention stay BF16 as for FP8.

Fusion (``fp8_fused_casts``): Transformer Engine quantizes a GEMM input inside the kernel that
produces it (``LayerNormLinear`` / ``LayerNormMLP``: the norm writes FP8; fused SwiGLU + cast
before the MLP output projection). The fused cast keeps only its write: the separate 2 B read
disappears (delayed, blockwise, mxfp8, and the first rowwise layout, whose row the producer
owns). Current tensorwise (and NVFP4) scaling needs the amax before it can cast, so fusion only folds the
amax pass into the producer's epilogue (torch.compile / TE norm amax); the cast pass remains.
Only forward inputs marked ``GemmOp.cast_fusable`` fuse; weights and gradients never do here.

Weights: Transformer Engine casts FP8 weights on the first micro-batch of a step and reuses
them for the rest (``is_first_microbatch``, passed by Megatron-Core); with
``fp8_weight_cache`` the weight casts leave the per-micro-batch ops and are charged once per
step (``weight_cast_bytes_per_step``, added to the optimizer pass). torchao casts weights in
every forward (``fp8_weight_cache=False``).

FP8 tensor-parallel gathers (``tp_gather``, ``Strategy.fp8_tp_gather``): with sequence
parallelism each rank holds a 1/t sequence shard of the column-parallel input X and of the
row-parallel output gradient dY, and all-gathers it before the GEMM. torchao's float8 TP styles
(``PrepareFloat8ModuleInput``, ``Float8ColwiseParallel``, ``Float8RowwiseParallel``;
torchao ``float8/float8_tensor_parallel.py``), which torchtitan uses under tensorwise scaling
only (``parallelize.py`` ``apply_tp``: ``enable_float8_tensorwise_tp``), cast the shard to FP8
with one per-tensor scale (amax all-reduced over TP) and gather FP8, so the cast reads and
writes E/t elements; the second layout is an FP8 transpose of the gathered tensor (read and
write E bytes), valid because one scale covers the whole tensor (``gathered_quantize_bytes``).

Which GEMMs stay BF16: the MoE router and LM head (``GemmOp.fp8_eligible=False``), the attention
core (flash attention runs in BF16: ``AttentionOp`` is never FP8 here), the weight-gradient
GEMMs under ``rowwise-hp-wgrad``, and the GEMMs outside the recipe's scope
(``Strategy.fp8_gemm_scope``, ``scoped_fp8_ops``): torchtitan converts linear layers and the
routed experts' grouped GEMMs with two separate converters (torchtitan ``quantize.linear.mx``
/ ``float8`` swap ``nn.Linear`` modules; ``quantize.grouped_mm.mx`` / torchao
``MoETrainingConfig`` wrap the expert weights so ``torch._grouped_mm`` runs scaled;
frameworks.md §3 "MXFP8 linear / grouped GEMM"), so a run may quantize either or both.
Transformer Engine (Megatron-Core) converts both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from perfcast.errors import InputError
from perfcast.graph.ops import GemmOp, MemoryOp, Op, Phase
from perfcast.graph.param_sharding import StageParams
from perfcast.specs.dtypes import BYTES_PER_ELEMENT

HP_BYTES = BYTES_PER_ELEMENT["bf16"]
"""High-precision source of every cast (BF16 activations, gradients, working weights)."""
FP8_BYTES = BYTES_PER_ELEMENT["fp8"]
FP4_BYTES = BYTES_PER_ELEMENT["fp4"]
SCALE_FP32_BYTES = BYTES_PER_ELEMENT["fp32"]
MX_BLOCK = 32
"""MX block size (OCP MX spec v1.0 §5.2: k = 32 for MXFP8), one E8M0 byte per block."""
DEEPSEEK_TILE = 128
"""Blockwise tile: 1×128 for activations/gradients, 128×128 for weights (DeepSeek-V3 §3.3.2)."""
NVFP4_BLOCK = 16
"""NVFP4 block: 1×16 for activations/gradients, 16×16 for weights, one E4M3 byte each (NVFP4
pretraining paper §2, §4.1)."""


def gemm_format(recipe: str | None) -> Literal["fp8", "fp4"]:
    """Tensor-core format of the low-precision GEMMs of ``recipe``: 'fp4' for NVFP4, else 'fp8'."""
    return "fp4" if recipe == "nvfp4" else "fp8"


def gemm_in_fp8(op: GemmOp, precision: str, recipe: str | None) -> bool:
    """Whether ``op`` runs on the FP8 tensor cores: FP8 training, a linear layer (not router /
    LM head), and not a weight-gradient GEMM under ``rowwise-hp-wgrad`` (torchao float8
    README: "rowwise_with_gw_hp" keeps grad_weight = input_t @ grad_output in BF16)."""
    return _pass_in_fp8(op.fp8_eligible, op.phase, precision, recipe)


def _pass_in_fp8(fp8_eligible: bool, phase: Phase, precision: str, recipe: str | None) -> bool:
    """``gemm_in_fp8`` of a GEMM with ``fp8_eligible`` in ``phase``."""
    if precision != "fp8" or not fp8_eligible:
        return False
    return not (recipe == "rowwise-hp-wgrad" and phase == Phase.BACKWARD_WGRAD)


def scope_converts(scope: str, routed_expert: bool) -> bool:
    """Whether the FP8 scope converts a GEMM (and its weight) of a routed expert or not:
    'all' every GEMM, 'linear' all but the routed experts' GEMMs, 'grouped' only those
    (``Strategy.fp8_gemm_scope``)."""
    if scope == "all":
        return True
    if scope in ("linear", "grouped"):
        return routed_expert == (scope == "grouped")
    raise InputError("fp8_gemm_scope", scope, "must be all, linear or grouped")


def in_fp8_scope(op: GemmOp, scope: str) -> bool:
    """Whether the recipe's scope converts ``op`` (``scope_converts``)."""
    return scope_converts(scope, op.routed_expert)


def fp8_weight_params(params: StageParams, scope: str):
    """Weights this GPU computes with in FP8 (before ZeRO sharding), embedding/LM head
    excluded: the non-expert linear weights and the routed experts' as ``scope`` converts
    them (``scope_converts``). What FP8 parameter storage, FP8 weight copies, the per-step
    weight casts and the FP8 parameter gathers all count."""
    return ((params.dense - params.embedding) * scope_converts(scope, False)
            + params.expert * scope_converts(scope, True))


def scoped_fp8_ops(forward: Sequence[Op], scope: str) -> list[Op]:
    """``forward`` with the GEMMs outside the FP8 scope kept in BF16 (``fp8_eligible=False``):
    no FP8 GEMM and no quantize kernels for them (``fp8_cast_ops`` skips them)."""
    if scope == "all":
        return list(forward)
    return [replace(op, fp8_eligible=False)
            if isinstance(op, GemmOp) and op.fp8_eligible and not in_fp8_scope(op, scope)
            else op for op in forward]


def scale_bytes(elements, reduce_len, recipe: str, weight: bool):
    """Bytes of the scale factors of one FP8 layout of ``elements`` elements whose GEMM reduces
    over ``reduce_len`` (see the module docstring for each recipe's granularity)."""
    if recipe in ("rowwise", "rowwise-hp-wgrad"):
        return SCALE_FP32_BYTES * elements / reduce_len
    if recipe == "mxfp8":
        return elements / MX_BLOCK
    if recipe == "nvfp4":
        return elements / (NVFP4_BLOCK ** 2 if weight else NVFP4_BLOCK)
    if recipe == "blockwise":
        tile = DEEPSEEK_TILE ** 2 if weight else DEEPSEEK_TILE
        return SCALE_FP32_BYTES * elements / tile
    return 0.0 * elements


def cast_bytes(elements, layouts: int, recipe: str, fused: bool):
    """HBM bytes of the data (scales excluded) to quantize ``elements`` BF16 elements into
    ``layouts`` FP8 layouts; per-recipe formulas in the module docstring. Array-friendly."""
    if layouts == 0:
        return 0.0 * elements
    low_bytes = FP4_BYTES if gemm_format(recipe) == "fp4" else FP8_BYTES
    read, write = HP_BYTES * elements, low_bytes * elements * layouts
    if recipe in ("tensorwise", "nvfp4"):
        return (0 if fused else read) + read + write
    if recipe in ("delayed", "blockwise", "mxfp8"):
        return (0 if fused else read) + write
    if recipe in ("rowwise", "rowwise-hp-wgrad"):
        return (layouts - (1 if fused else 0)) * read + write
    raise InputError("fp8_recipe", recipe, "has no cast model")


def strided_amax_bytes(elements, reduce_dims: tuple[str, ...], recipe: str, weight: bool,
                       one_graph: bool = False):
    """Extra BF16 read of the separate amax pass of each per-row-scaled layout that reduces
    along the tensor's strided axis (module docstring, ``rowwise``): 'rows' (the m tokens) of
    an activation, 'cols' (n) of a weight stored [n, k] as ``nn.Linear`` does. Zero for other
    recipes and when every layout is cast in ``one_graph`` (dY). Array-friendly."""
    if recipe not in ("rowwise", "rowwise-hp-wgrad") or one_graph:
        return 0.0 * elements
    strided = "cols" if weight else "rows"
    return HP_BYTES * elements * sum(d == strided for d in reduce_dims)


def rht_layout_bytes(elements, reduce_dims: tuple[str, ...], recipe: str, weight: bool):
    """Extra BF16 read of the NVFP4 weight-gradient layout of an activation or gradient (module
    docstring, ``nvfp4``): the layout reducing over the m tokens ('rows') passes through the
    random Hadamard transform and is cast from BF16 by a kernel of its own (NVFP4 pretraining
    paper §4.2; Transformer Engine ``NVFP4Quantizer``). Zero for weights, for other recipes and
    for a tensor with a single layout (its one cast reads the tensor anyway). Array-friendly."""
    if recipe != "nvfp4" or weight or len(reduce_dims) < 2:
        return 0.0 * elements
    return HP_BYTES * elements * sum(d == "rows" for d in reduce_dims)


def quantize_bytes(rows, cols, batch, reduce_dims: tuple[str, ...], recipe: str, fused: bool,
                   weight: bool = False, one_graph: bool = False):
    """HBM bytes to quantize a BF16 ``rows×cols`` tensor (``batch`` of them) into one FP8 layout
    per entry of ``reduce_dims`` ('rows' or 'cols': the axis that layout's GEMM reduces over):
    ``cast_bytes`` plus ``scale_bytes`` of each layout plus ``strided_amax_bytes`` plus
    ``rht_layout_bytes``. ``fused`` = produced by the previous op; ``one_graph``: all layouts
    cast in one graph (dY)."""
    E = rows * cols * batch
    scales = sum(scale_bytes(E, rows if d == "rows" else cols, recipe, weight) for d in reduce_dims)
    return (cast_bytes(E, len(reduce_dims), recipe, fused) + scales
            + strided_amax_bytes(E, reduce_dims, recipe, weight, one_graph)
            + rht_layout_bytes(E, reduce_dims, recipe, weight))


PER_TENSOR_RECIPES = ("tensorwise", "delayed")
"""Recipes with one scale per tensor: a shard's FP8 cast can be gathered and transposed as is."""


def gathered_quantize_bytes(rows, cols, batch, reduce_dims: tuple[str, ...], recipe: str,
                            fused: bool, tp: int):
    """HBM bytes to quantize a ``rows×cols`` operand that TP all-gathers along its rows in FP8
    (module docstring, "FP8 tensor-parallel gathers"): the first layout cast on this rank's
    ``rows/tp`` shard (``quantize_bytes``), each further layout an FP8 transpose of the gathered
    tensor, 2·1 B per element. ``recipe`` must be per-tensor (``PER_TENSOR_RECIPES``)."""
    if recipe not in PER_TENSOR_RECIPES:
        raise InputError("fp8_recipe", recipe, "cannot gather FP8 over TP (needs one scale "
                         "per tensor: tensorwise or delayed)")
    local = quantize_bytes(rows / tp, cols, batch, reduce_dims[:1], recipe, fused)
    return local + 2 * FP8_BYTES * rows * cols * batch * max(len(reduce_dims) - 1, 0)


def _operand_bytes(op: GemmOp, part: str, rows, cols, reduce_dims: tuple[str, ...], recipe: str,
                   fused: bool, tp_gather: int, weight: bool = False):
    """``quantize_bytes`` of one operand of ``op``, or ``gathered_quantize_bytes`` when TP
    gathers it in FP8 (``GemmOp.tp_gathered == part`` and ``tp_gather > 1``)."""
    if tp_gather > 1 and op.tp_gathered == part and reduce_dims:
        return gathered_quantize_bytes(rows, cols, op.batch, reduce_dims, recipe, fused,
                                       tp_gather)
    return quantize_bytes(rows, cols, op.batch, reduce_dims, recipe, fused, weight,
                          one_graph=part == "grad")


def tp_gather_bytes_per_element(fp8_gather: bool) -> float:
    """Bytes per element of the sequence-parallel TP all-gathers: FP8 (1 B) when the recipe
    casts before gathering (``fp8_gather``: ``Strategy.fp8_tp_gather`` under an FP8 recipe),
    else the 16-bit activation. Under sequence parallelism the forward all-gathers assemble
    the column-parallel inputs X and the backward ones the row-parallel output gradients dY
    (Korthikanti et al. 2022 §4.2.2); torchao's float8 TP styles cast both to FP8 before the
    gather (``PrepareFloat8ModuleInput`` for X, ``Float8RowwiseParallel`` casting dY to e5m2
    before the backward gather), while the reduce-scatters of partial sums stay in BF16
    (torchao ``float8/float8_tensor_parallel.py``; torchtitan ``models/llama3/infra/
    parallelize.py`` ``apply_tp``)."""
    return float(FP8_BYTES if fp8_gather else HP_BYTES)


def _fp8_uses(op: GemmOp, recipe: str) -> dict[str, tuple[str, ...]]:
    """For each operand of forward GEMM ``op``, the reduction axes of the FP8 GEMMs using it."""
    fwd, dgrad, wgrad = (_pass_in_fp8(op.fp8_eligible, p, "fp8", recipe)
                         for p in (Phase.FORWARD, Phase.BACKWARD_DGRAD, Phase.BACKWARD_WGRAD))
    # X (m×k): forward reduces k (cols), wgrad m (rows); W (k×n): forward k (rows), dgrad n
    # (cols); dY (m×n): dgrad n (cols), wgrad m (rows).
    return {
        "input": ("cols",) * fwd + ("rows",) * wgrad,
        "weight": ("rows",) * fwd + ("cols",) * dgrad,
        "grad": ("cols",) * dgrad + ("rows",) * wgrad,
    }


def fp8_cast_ops(forward: Sequence[Op], recipe: str | None, fused: bool = True,
                 weight_cache: bool = True, tp_gather: int = 1) -> list[MemoryOp]:
    """Cast/scale kernels of the forward GEMMs in ``forward`` for one micro-batch: input casts
    (forward phase), weight casts (forward; none when cached per step), gradient casts
    (backward). ``recipe=None`` (16-bit training) adds nothing. ``tp_gather``: the TP degree
    whose sequence-parallel all-gathers carry FP8 (1 = none; module docstring)."""
    if recipe is None:
        return []
    ops: list[MemoryOp] = []
    for op in forward:
        if not isinstance(op, GemmOp) or op.phase != Phase.FORWARD:
            continue
        uses = _fp8_uses(op, recipe)
        m, n, k, b = op.m, op.n, op.k, op.batch
        x = _operand_bytes(op, "input", m, k, uses["input"], recipe, fused and op.cast_fusable,
                           tp_gather)
        w = 0.0 if weight_cache else quantize_bytes(k, n, b, uses["weight"], recipe, False, True)
        g = _operand_bytes(op, "grad", m, n, uses["grad"], recipe, False, tp_gather)
        ops += [MemoryOp(f"{op.name}_{part}_fp8_cast", phase, nbytes, op.count)
                for part, phase, nbytes in (("input", Phase.FORWARD, x),
                                            ("weight", Phase.FORWARD, w),
                                            ("grad", Phase.BACKWARD_DGRAD, g)) if nbytes]
    return ops


def gathered_weight_bytes_per_param(recipe: str | None) -> float:
    """Bytes per linear-layer weight element in a data-parallel all-gather of FP8 parameters
    (``Strategy.fp8_param``): the low-precision element (1 B FP8, 0.5 B NVFP4) plus the scales
    of the recipe's weight blocks (``scale_bytes``: 1/32 B for MXFP8, 1/256 B for NVFP4,
    4/128² B for blockwise, none for a per-tensor scale). A per-row scale (4 B per row of
    thousands of elements) is left out: torchao gathers FP8 only under tensorwise scaling.

    Sources: Megatron-LM ``--fp8-param-gather`` "keeps weights in FP8 and all-gathers in FP8"
    (shared/reference/frameworks.md §1, MLM:DDP L77); torchao/torchtitan
    ``enable_fsdp_float8_all_gather`` casts each FSDP2 shard to FP8 before the all-gather
    (tensorwise only; rowwise "does comm in high precision", frameworks.md §3
    ``quantize.linear.float8.recipe_name``)."""
    element = FP4_BYTES if gemm_format(recipe) == "fp4" else FP8_BYTES
    if recipe in (None, "tensorwise", "delayed", "rowwise", "rowwise-hp-wgrad"):
        return float(element)
    return float(element + scale_bytes(1.0, 1.0, recipe, weight=True))


def weight_cast_bytes_per_step(weight_elements, recipe: str):
    """Bytes of the once-per-step cast of cached FP8 weights: every recipe keeps W in FP8 for
    forward and dgrad (two layouts), unfused; weight scales (at most 4 B per 128 elements)
    are left out. Array-friendly."""
    return cast_bytes(weight_elements, 2, recipe, False)
