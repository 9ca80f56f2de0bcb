"""Cost of one engine step (decode tokens + prefill chunks) as fast table look-ups.

The discrete-event simulation (``estimate.serving_sim``) prices tens of thousands of steps, so
the per-step cost model of ``estimate.inference_phases.step_time`` (operator graph, roofline
kernels, TP all-reduce, calibrated overheads) is evaluated once, on grids, and interpolated
(linear in log-log space) afterwards. A step with ``b`` decode sequences of total KV ``K``,
``p`` prefill tokens and ``n`` sampled rows costs

    t = body(b + p) + head(n) + attn_decode(b, K/b) + Σ_chunks [attn_causal(a + q) − attn_causal(a)]

* body(T): every GEMM (experts split by EP; with tokens replicated over the TP group — the
  engines' default MoE path without attention DP — the expert outputs ride the TP all-reduce
  and no all-to-all is charged), memory-bound op and collective of T tokens with its host overheads —
  a decode-only step as a CUDA graph when b ≤ the engine's captured batch size (no per-layer
  or per-step launch overhead, ``inference_phases``), a mixed step as a piecewise graph where
  the engine has them for its token count (``EngineConfig.mixed_step_graphed``; a decode batch
  above the decode graphs' size likewise), else eager; the prefill overheads
  (``prefill_layer_overhead_s``, ``prefill_overhead_fraction``) are charged on the prefill
  tokens' share p/T only;
* head(n): the LM head and sampling of the n rows that produce a token;
* decode attention reads the cache once per step (``inference_kernels``);
* a chunk of q prompt tokens after a tokens already cached costs the causal attention of
  a + q tokens minus that of a (causal FLOPs are cumulative in the prefix; Agrawal et al.,
  Sarathi-Serve, OSDI 2024 §3).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace
from math import exp, log

import numpy as np

from perfcast.catalog.serving_engines import EngineConfig
from perfcast.estimate.inference_ops import AttentionPass
from perfcast.estimate.inference_phases import ServingContext, host_bound_s, step_time


def _grid(top: float, points_per_octave: int = 2) -> np.ndarray:
    """1, …, top on a log scale (``points_per_octave`` per doubling), top included."""
    n = max(2, int(np.ceil(np.log2(max(top, 2.0)) * points_per_octave)) + 1)
    return np.unique(np.round(np.geomspace(1.0, max(top, 2.0), n)))


class _LogInterp:
    """y(x) by linear interpolation of log y over log x (clamped, extrapolated linearly above)."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.lx = [log(float(v)) for v in x]
        self.ly = [log(max(float(v), 1e-15)) for v in y]
        self.x_top, self.y_top = float(x[-1]), float(y[-1])

    def __call__(self, x: float) -> float:
        if x <= 0:
            return 0.0
        if x >= self.x_top:
            return self.y_top * x / self.x_top
        lx = log(max(x, 1.0))
        i = min(max(bisect_right(self.lx, lx) - 1, 0), len(self.lx) - 2)
        w = (lx - self.lx[i]) / (self.lx[i + 1] - self.lx[i])
        return exp(self.ly[i] + w * (self.ly[i + 1] - self.ly[i]))


class _LogInterp2D:
    """z(b, k) bilinear in log space over a (b, k) grid; linear in b above the grid."""

    def __init__(self, b: np.ndarray, k: np.ndarray, z: np.ndarray) -> None:
        self.rows = [_LogInterp(k, z[i]) for i in range(len(b))]
        self.lb = [log(float(v)) for v in b]
        self.b_top = float(b[-1])

    def __call__(self, b: float, k: float) -> float:
        if b <= 0:
            return 0.0
        if b >= self.b_top:
            return self.rows[-1](k) * b / self.b_top
        lb = log(max(b, 1.0))
        i = min(max(bisect_right(self.lb, lb) - 1, 0), len(self.lb) - 2)
        w = (lb - self.lb[i]) / (self.lb[i + 1] - self.lb[i])
        lo, hi = self.rows[i](k), self.rows[i + 1](k)
        return exp(log(lo) + w * (log(hi) - log(lo)))


@dataclass(frozen=True)
class StepCost:
    """Seconds of one step of the engine on one model replica (tables built once)."""

    body_graphed: _LogInterp
    body_eager: _LogInterp
    body_prefill: _LogInterp
    head: _LogInterp
    attn_decode: _LogInterp2D
    attn_causal: _LogInterp
    graph_max_batch: int
    mixed_graphs: bool
    mixed_graph_max_tokens: float
    """Largest step the mixed/prefill graphs cover (inf: every step)."""

    def _mixed_graphed(self, tokens: float) -> bool:
        return self.mixed_graphs and tokens <= self.mixed_graph_max_tokens

    def decode_s(self, b: float, kv_total: float) -> float:
        """A decode-only step of b sequences holding kv_total cached tokens."""
        body = self.body_graphed(b) if (b <= self.graph_max_batch or self._mixed_graphed(b)) \
            else self.body_eager(b)
        return body + self.head(b) + self.attn_decode(b, kv_total / b)

    def mixed_s(self, b: float, kv_total: float, prefill_tokens: float,
                prefill_attn_s: float, sampled: float) -> float:
        """A step with b decode sequences and ``prefill_tokens`` prompt tokens."""
        if prefill_tokens <= 0:
            return self.decode_s(b, kv_total)
        t = b + prefill_tokens
        eager = self.body_eager(t)
        base = self.body_graphed(t) if self._mixed_graphed(t) else eager
        share = prefill_tokens / t
        body = base + share * max(self.body_prefill(t) - eager, 0.0)
        attn = self.attn_decode(b, kv_total / b) if b > 0 else 0.0
        return body + self.head(sampled) + attn + prefill_attn_s

    def chunk_attention_s(self, done: float, chunk: float) -> float:
        """Causal attention of ``chunk`` prompt tokens after ``done`` cached ones."""
        return self.attn_causal(done + chunk) - self.attn_causal(done)


def replicated_moe(ctx: ServingContext, engine: EngineConfig) -> bool:
    """MoE tokens stay replicated over the TP group (no all-to-all): EP inside TP, no attention
    DP, and an engine whose default MoE path all-reduces expert outputs."""
    return (engine.moe_dispatch == "allreduce" and not ctx.attention_dp
            and ctx.strategy.ep <= ctx.strategy.tp)


def _seconds(step, no_ep_comm: bool) -> np.ndarray:
    total = np.asarray(step.total_s, dtype=float)
    return total - np.asarray(step.ep_comm_s, dtype=float) if no_ep_comm else total


def _body(ctx: ServingContext, tokens: np.ndarray, prefill: bool, graphs: bool,
          no_ep_comm: bool) -> np.ndarray:
    c = replace(ctx, cuda_graphs=graphs)
    step = step_time(c, tokens, (), np.ones_like(tokens), prefill=prefill)
    seconds = host_bound_s(c, _seconds(step, no_ep_comm), tokens, (), graphs and not prefill)
    return seconds * np.ones_like(tokens)


def _causal_attention(ctx: ServingContext, lengths: np.ndarray) -> np.ndarray:
    """Causal prefill attention of one sequence of each length, all layers. Sliding-window
    models branch on the window per length, so they are evaluated one length at a time."""
    def one(seq):
        step = step_time(ctx, seq, (AttentionPass(1.0, seq, seq, True),), 1.0, prefill=True)
        return np.asarray(step.attention_s, dtype=float)
    if ctx.model.sliding_window is not None:
        return np.array([float(one(float(n))) for n in lengths])
    return one(lengths) * np.ones_like(lengths)


def build_step_cost(ctx: ServingContext, engine: EngineConfig, max_seqs: int,
                    max_context: int) -> StepCost:
    """Tabulate ``inference_phases.step_time`` for this model, system and engine."""
    top_tokens = engine.token_budget_per_step + max_seqs
    tokens = _grid(top_tokens)
    no_a2a = replicated_moe(ctx, engine)
    graphed = _body(ctx, tokens, prefill=False, graphs=True, no_ep_comm=no_a2a)
    eager = _body(ctx, tokens, prefill=False, graphs=False, no_ep_comm=no_a2a)
    prefill = _body(ctx, tokens, prefill=True, graphs=False, no_ep_comm=no_a2a)
    ones = np.ones_like(tokens)
    with_head = np.asarray(step_time(ctx, ones, (), tokens).total_s, dtype=float)
    head = np.maximum(with_head - float(with_head[0]), 1e-9) * ones
    seqs = _grid(max(max_seqs, 2))
    kv = _grid(max(max_context, 2))
    B, KV = np.meshgrid(seqs, kv, indexing="ij")
    attn = step_time(ctx, B.ravel(), (AttentionPass(B.ravel(), 1, KV.ravel(), causal=False),),
                     B.ravel()).attention_s
    attn = np.asarray(attn, dtype=float).reshape(B.shape)
    lengths = _grid(max(max_context, 2))
    causal = _causal_attention(ctx, lengths)
    return StepCost(
        body_graphed=_LogInterp(tokens, graphed), body_eager=_LogInterp(tokens, eager),
        body_prefill=_LogInterp(tokens, prefill), head=_LogInterp(tokens, head),
        attn_decode=_LogInterp2D(seqs, kv, attn), attn_causal=_LogInterp(lengths, causal),
        graph_max_batch=engine.cuda_graph_max_batch, mixed_graphs=engine.mixed_step_graphs,
        mixed_graph_max_tokens=(float("inf") if engine.mixed_step_graph_max_tokens is None
                                else float(engine.mixed_step_graph_max_tokens)))
