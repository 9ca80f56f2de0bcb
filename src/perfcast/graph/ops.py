"""Operator records: the cost-relevant facts of one kernel or collective, nothing about time.

A ``GemmOp`` is C[m, n] = A[m, k] · B[k, n] repeated ``batch`` times (2·m·n·k·batch FLOPs).
An ``AttentionOp`` is a fused (flash) attention over ``heads`` heads. A ``MemoryOp`` is a
memory-bound kernel (norm, activation, rotary, residual, softmax, loss, optimizer) that moves
``bytes_moved`` through HBM. A ``CommOp`` is a collective on one parallel group. Every op has a
``count`` (how many times it runs per layer/stage pass) and a ``phase``.
The ``kernels`` and ``comm`` layers turn these into seconds; FLOP counts come from the one
hardware-free counting module, ``op_counts``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from perfcast.arrays import Floats
from perfcast.op_counts import attention_flops, gemm_flops


class Phase(str, Enum):
    """Which pass an op belongs to."""

    FORWARD = "forward"
    BACKWARD_DGRAD = "backward_dgrad"
    """Input-gradient work (needed to continue backpropagation)."""
    BACKWARD_WGRAD = "backward_wgrad"
    """Weight-gradient work (can be deferred, e.g. zero-bubble schedules)."""


class OpKind(str, Enum):
    """Breakdown category of an op (the report sums time per kind)."""

    GEMM = "gemm"
    ATTENTION = "attention"
    MEMORY_BOUND = "memory_bound"
    COMM = "comm"


class Group(str, Enum):
    """The parallel group a collective runs on."""

    TP = "tp"
    TP_ROW = "tp_row"
    """2D TP: the cols ranks of a grid row (innermost; all tp ranks for 1D TP)."""
    TP_COL = "tp_col"
    """2D TP: the rows ranks of a grid column (stride cols)."""
    CP = "cp"
    CP_A2A = "cp_a2a"
    """Inner context-parallel ranks the Ulysses all-to-alls span (all cp for ``a2a``)."""
    CP_RING = "cp_ring"
    """Context-parallel ranks the K/V ring / all-gather spans (all cp for ``p2p``)."""
    DP = "dp"
    DP_CP = "dp_cp"
    """Gradient-reduction group of non-expert weights: dp·cp ranks (Megatron-Core)."""
    PP = "pp"
    EP = "ep"
    EDP = "edp"


class Collective(str, Enum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


@dataclass(frozen=True)
class GemmOp:
    name: str
    phase: Phase
    m: Floats
    n: Floats
    k: Floats
    batch: Floats = 1
    count: float = 1
    fp8_eligible: bool = True
    """Runs in FP8 when the strategy trains in FP8 (linear layers; not the router/LM head);
    the recipe may still keep some GEMMs in BF16 (``graph.fp8_casts.gemm_in_fp8``)."""
    cast_fusable: bool = False
    """The forward input comes from a norm or activation kernel that can write it in FP8
    itself (Transformer Engine LayerNormLinear, fused SwiGLU + cast; ``graph.fp8_casts``)."""
    routed_expert: bool = False
    """A routed experts' GEMM (grouped over the local experts): the recipe's scope may keep it,
    or everything but it, in BF16 (``Strategy.fp8_gemm_scope``, ``graph.fp8_casts``)."""
    tp_gathered: str = ""
    """Operand that a sequence-parallel TP all-gather assembles before this GEMM: 'input' (the
    column-parallel X: QKV, MLP-in) or 'grad' (the row-parallel dY: out-projection, MLP-out;
    Korthikanti et al. 2022 §4.2.2); '' = none. With FP8 TP gathers it is cast on the
    sequence shard (``graph.fp8_casts.gathered_quantize_bytes``)."""
    grouped_kernel: bool = False
    """The ``batch`` GEMMs run as one grouped kernel (the routed experts under
    ``Strategy.moe_grouped_gemm``), timed at the generation's grouped-GEMM efficiency
    (``calibration.kernel_analytical.GemmTileModel.grouped_bf16_ratio``)."""

    kind = OpKind.GEMM

    @property
    def flops(self):
        """2·m·n·k per GEMM (``op_counts.gemm_flops``), times batch and count."""
        return self.count * gemm_flops(self.m, self.n, self.k, self.batch)


@dataclass(frozen=True)
class AttentionOp:
    name: str
    phase: Phase
    batch: Floats
    heads: float
    seq_q: Floats
    seq_kv: Floats
    head_dim_qk: float
    head_dim_v: float
    causal: bool = True
    window: float | None = None
    """Sliding-window size in tokens (None = full)."""
    count: float = 1
    balanced_causal_chunks: bool = False
    """Context parallelism with load-balanced causal chunks (Megatron-Core CP: each rank holds
    chunks i and 2·cp−1−i): the rank's queries see half the keys on average, so it does
    1/cp of the causal work, (s²/2)/cp."""
    fused: bool = True
    """Flash attention; False = unfused GEMMs + softmax/dropout passes over the scores
    (``kernels.unfused_attention``)."""
    dropout: bool = False
    """Attention dropout on the probabilities (a separate pass when unfused)."""

    kind = OpKind.ATTENTION

    @property
    def kernel_seq_kv(self):
        """Keys per query of the equivalent kernel call (with ``kernel_causal``).

        A sliding window of w < seq_kv keys: w keys per query, no mask. Load-balanced causal
        CP chunks: s/2 keys per query on average, no mask. Otherwise the op as it is.
        """
        if self.window is not None and self.window < self.seq_kv:
            return self.window
        if self.causal and self.balanced_causal_chunks:
            return self.seq_kv / 2
        return self.seq_kv

    @property
    def kernel_causal(self) -> bool:
        """Whether the equivalent kernel call applies a causal mask (see ``kernel_seq_kv``)."""
        if self.window is not None and self.window < self.seq_kv:
            return False
        return self.causal and not self.balanced_causal_chunks

    @property
    def flops(self):
        """Matmul FLOPs of the equivalent kernel call (``op_counts.attention_flops``:
        forward 2·b·a·sq·skv·(d_qk + d_v)·causal fraction, backward 2.5× forward)."""
        return self.count * attention_flops(
            self.batch, self.heads, self.seq_q, self.kernel_seq_kv, self.head_dim_qk,
            self.head_dim_v, self.kernel_causal, self.phase != Phase.FORWARD)


@dataclass(frozen=True)
class MemoryOp:
    name: str
    phase: Phase
    bytes_moved: Floats
    count: float = 1

    kind = OpKind.MEMORY_BOUND

    @property
    def flops(self):
        return 0.0


LOW_LATENCY_ALGORITHM = "deepep-low-latency"
"""``CommOp.algorithm`` of a DeepEP low-latency dispatch or combine (timed by
``comm.dispatch.low_latency_all_to_all_time_s``, not by an NCCL algorithm)."""


@dataclass(frozen=True)
class CommOp:
    name: str
    phase: Phase
    group: Group
    collective: Collective
    size_bytes: Floats
    """Buffer size as nccl-tests counts it (the full gathered/reduced buffer)."""
    count: float = 1
    overlappable: bool = False
    """Whether the framework overlaps it with independent compute by default."""
    first_ring_step_only: bool = False
    """A context-parallel exchange waited for at the ring's second step, so it overlaps only
    the first step's attention, 1/P of the pass's (PyTorch's all-gather rotation,
    ``graph.torch_context_parallel``)."""
    algorithm: str | None = None
    """Collective algorithm forced by the framework (``comm.select.Algorithm`` value); None =
    what NCCL would pick."""
    fanout: int = 1
    """Destinations of each token in an MoE dispatch (top-k); a node-deduplicating dispatcher
    (DeepEP) sends a token once per destination node (``comm.dispatch``)."""
    route_groups: tuple[int, int] = (1, 1)
    """(expert groups G, groups per token M) of group-limited routing; (1, 1) = unlimited."""

    kind = OpKind.COMM

    @property
    def flops(self):
        return 0.0


ComputeOp = GemmOp | AttentionOp | MemoryOp
Op = GemmOp | AttentionOp | MemoryOp | CommOp
