"""Bulk screen of deployments: per-instance step times from the serving physics, then
steady-state closed-loop formulas evaluated on numpy arrays over every deployment at once.

The discrete-event simulation (``estimate.serving_sim``) costs 10–100 ms a deployment; the
screen prices each instance layout once through the same per-step cost function the simulation
tabulates (``inference_phases.step_time`` on the context ``estimate.serving.serving_setup``
builds: same engine scheduler, CUDA-graph rule, overlap scheduler, replicated-MoE rule) and
then evaluates every concurrency and pool combination with array arithmetic. Its numbers rank
candidates only: the best ones are re-scored by the exact path (``serving_search.exact``), and
only re-scored numbers are reported.

Steady state of b sequences decoding on one instance with c closed-loop clients (Little's law;
Orca/vLLM iteration-level scheduling): during one request's life every other running request
is admitted once, so a lifetime holds b prefills and O − 1 decode steps,

    e2e = b·t_prefill + (O − 1)·t_decode(b),      X = b / e2e requests/s,
    TTFT = max(t_prefill, (b + 1)/(2R)) + w·t_decode(b) + (c/b − 1)·e2e,
    TPOT = (e2e − t_prefill)/(O − 1),

A closed loop that starts all clients at once stays synchronized: the b prompts arrive
together and are prefilled at the instance's prompt rate R (a full token budget of prompts
per step), so a prompt waits on average for half of the burst, (b + 1)/(2R). w = 2 steps of
admission wait with an overlap scheduler, 1 without (``serving_sim``); clients beyond the KV
capacity (c > b) queue for a whole lifetime per round.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.errors import InputError
from perfcast.estimate.inference_ops import AttentionPass
from perfcast.estimate.inference_phases import ServingContext, host_bound_s, step_time
from perfcast.estimate.serving import serving_setup
from perfcast.estimate.serving_step_cost import replicated_moe
from perfcast.kernels.backend import KernelBackendName, KernelBackendRef
from perfcast.serving_search.space import InstanceLayout
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec


@dataclass(frozen=True)
class LayoutTable:
    """Step times of one instance layout under the engine, for the screen."""

    layout: InstanceLayout
    max_seqs: int
    """Sequences of the full context the KV pool and the engine cap allow (0: does not fit)."""
    levels: np.ndarray
    """Running sequences priced (powers of two)."""
    decode_s: np.ndarray
    """Decode step of ``levels`` sequences at the mean context I + (O − 1)/2, seconds."""
    prefill_s: float
    """One prompt prefilled alone, seconds."""
    prefill_rate_per_s: float
    """Prompts per second at a full token budget of prompts (prefill-only instance)."""
    wait_steps: float
    """Steps an arrival waits for admission (2 with an overlap scheduler, else 1)."""


@dataclass(frozen=True)
class ScreenMetrics:
    """Screened serving metrics of many deployments (numpy arrays, one entry each)."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    output_tokens_per_s_per_gpu: np.ndarray

    @property
    def output_tokens_per_s_per_user(self) -> np.ndarray:
        return 1.0 / self.tpot_s


def _total_s(ctx: ServingContext, tokens, passes, logits, prefill: bool, no_ep_comm: bool):
    step = step_time(ctx, tokens, passes, logits, prefill=prefill)
    total = np.asarray(step.total_s, dtype=float)
    if no_ep_comm:
        total = total - np.asarray(step.ep_comm_s, dtype=float)
    return host_bound_s(ctx, total, tokens, passes, ctx.cuda_graphs and not prefill)


def layout_table(model: ModelSpec, system: SystemSpec, layout: InstanceLayout, input_len: int,
                 output_len: int, levels: np.ndarray, engine: str, *,
                 calibration: Calibration | None = None,
                 kernel_backend: KernelBackendRef = KernelBackendName.ROOFLINE) -> LayoutTable | None:
    """Price ``layout`` (None where the model rejects it: heads, layers or experts not divisible,
    a format the GPU lacks) with the calibration files of ``calibration`` (``perfcast calibrate
    --out DIR``; None: the shipped files) and ``kernel_backend`` (a name or a backend instance,
    e.g. over a user's ``--kernel-table``), as the simulation does."""
    cal = calibration or load_calibration()
    try:
        setup = serving_setup(model, system, layout.strategy(layout.gpus), engine=engine,
                              precision=layout.precision, kv_precision=layout.kv_precision,
                              attention_dp=layout.attention_dp,
                              calibration=cal, kernel_backend=kernel_backend)
    except InputError:
        return None
    config, ctx = setup.config, setup.ctx
    max_seqs = setup.memory.max_concurrent_seqs(input_len + output_len)
    no_a2a = replicated_moe(ctx, config)
    b = np.asarray(levels, dtype=float)
    context = input_len + (output_len - 1) / 2.0
    # array form of the scalar formulas: one entry per batch level (module docstring)
    decode = (AttentionPass(cast(float, b), 1, context, causal=False),)
    graphed = _total_s(replace(ctx, cuda_graphs=True), b, decode, b, False, no_a2a)
    eager = _total_s(replace(ctx, cuda_graphs=False), b, decode, b, False, no_a2a)
    cap = config.mixed_step_graph_max_tokens
    use_graph = (b <= config.cuda_graph_max_batch) | (
        config.mixed_step_graphs & (b <= (np.inf if cap is None else cap)))
    k = max(1, config.token_budget_per_step // input_len)
    prompts = np.array([1.0, float(k)])  # one prompt alone; a full token budget of prompts
    prefill = _total_s(replace(ctx, cuda_graphs=False), prompts * input_len,
                       (AttentionPass(cast(float, prompts), input_len, input_len, True),), prompts, True,
                       no_a2a) * np.ones(2)
    return LayoutTable(layout=layout, max_seqs=max_seqs, levels=b,
                       decode_s=np.where(use_graph, graphed, eager),
                       prefill_s=float(prefill[0]), prefill_rate_per_s=k / float(prefill[1]),
                       wait_steps=2.0 if config.overlap_scheduler else 1.0)


def closed_loop(prefill_s, prefill_rate_per_s, decode_s, running, clients, output_len: int,
                wait_steps, gpus_per_instance) -> ScreenMetrics:
    """Aggregated instances at steady state (module docstring); scalars or arrays."""
    steps = max(output_len - 1, 1)
    e2e = running * prefill_s + (output_len - 1) * decode_s
    queued = np.maximum(clients / running - 1.0, 0.0)
    burst = np.maximum(prefill_s, 0.5 * (running + 1.0) / prefill_rate_per_s)
    ttft = burst + wait_steps * decode_s + queued * e2e
    tpot = (e2e - prefill_s) / steps
    per_gpu = running / e2e * output_len / gpus_per_instance
    return ScreenMetrics(ttft_s=np.asarray(ttft, dtype=float), tpot_s=np.asarray(tpot, dtype=float),
                         output_tokens_per_s_per_gpu=np.asarray(per_gpu, dtype=float))


def disaggregated(prefill_s, prefill_rate_per_s, transfer_s, decode_s, batch, prefill_instances,
                  decode_instances, output_len: int, num_gpus) -> ScreenMetrics:
    """x prefill and y decode instances at steady state; scalars or arrays.

    Decode instances run b sequences each, TPOT = t_decode(b), so they ask for
    X = y·b / ((O − 1)·TPOT) prompts per second. The prefill pool serves them at utilisation
    ρ = X / (x·R) (R prompts/s of one instance) with the M/D/1 mean wait ρ/(2(1 − ρ)) service
    times (Kleinrock, Queueing Systems I, 1975, Pollaczek–Khinchine formula); at ρ ≥ 1 the pool
    limits throughput to x·R and the prompt queue grows without bound (TTFT = ∞).
    """
    steps = max(output_len - 1, 1)
    demand = decode_instances * batch / (steps * decode_s)
    supply = prefill_instances * prefill_rate_per_s
    rho = demand / supply
    stable = rho < 1.0
    wait = np.where(stable, rho / (2.0 * np.maximum(1.0 - rho, 1e-12)), np.inf)
    ttft = prefill_s * (1.0 + wait) + transfer_s
    served = np.minimum(demand, supply)
    return ScreenMetrics(
        ttft_s=np.asarray(ttft, dtype=float),
        tpot_s=np.asarray(decode_s * np.ones_like(ttft), dtype=float),
        output_tokens_per_s_per_gpu=np.asarray(served * output_len / num_gpus, dtype=float))
