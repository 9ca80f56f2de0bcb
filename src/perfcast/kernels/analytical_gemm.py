"""Tile/wave GEMM time: output tiles over SMs in waves, each tile bound by its matrix math or
its operand loads, the whole kernel by HBM; best tile (and split-K) chosen per shape.

For a candidate tile T_m×T_n on ``s`` SMs and split-K factor ``k_s`` (NVIDIA, *Matrix
Multiplication Background User's Guide*: tiles and wave quantization; CUTLASS split-K /
stream-K, Osama et al., *Stream-K*, PPoPP 2023):

* units = ⌈m/T_m⌉·⌈n/T_n⌉·batch·k_s, slots = SMs/s, k_u = ⌈k/k_s⌉;
* one unit: t_mma = 2·T_m·T_n·k_u/(s·F_sm·η), F_sm = sustained peak/SMs, η = main-loop
  efficiency; t_load = (T_m + T_n)·k_u·b_in/(s·B_sm) (one SM's load bandwidth);
* one wave of ``a`` units: max(t_mma, t_load, a·(T_m + T_n)·k_u·b_in/B_L2) + c_tile/f (L2 shared
  by the wave, fixed cycles per tile for pipeline fill and epilogue);
* waves: ``tiles.wave_quantized_time_s``; split-K adds fp32 partials written and read back;
* kernel: max(waves, HBM bytes/(BW·η_hbm)) + t_launch, HBM bytes = compulsory
  (``counts.gemm_bytes``) + partials.

Split-K is tried only when the output tiles fill less than one wave (skinny shapes, decode);
the best (tile, split) is the fastest, as cuBLAS/CUTLASS heuristics aim to pick. Array-friendly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.kernel_analytical import GemmTileModel
from perfcast.calibration.kernel_roofline import GEMM_CLASS
from perfcast.kernels.efficiency import memory_time_s
from perfcast.kernels.tiles import (
    ceil_div,
    matrix_clock_Hz,
    num_tiles,
    num_waves,
    per_sm_matrix_flops,
    sm_count,
    wave_quantized_time_s,
)
from perfcast.op_counts import gemm_bytes
from perfcast.specs.dtypes import bytes_per_element
from perfcast.specs.hardware import GPUSpec, Precision

PARTIAL_BYTES = 4.0
"""Split-K partial sums are fp32 (CUTLASS ``GemmSplitKParallel`` workspace, 4 B/element)."""

GEMM_MEMO_SIZE = 1 << 16
"""Scalar GEMM calls memoized per analytical backend (a 405B estimate uses ~40 shapes, a
16,384-GPU search's layer tables about 1,300)."""


@dataclass(frozen=True)
class GemmRates:
    """Per-SM and whole-GPU rates for one GPU, precision and calibration (SI)."""

    sms: int
    clock_Hz: float
    sm_flops: float
    """Achievable matrix FLOP/s of one SM in the main loop (F_sm·η)."""
    sm_load_Bps: float
    l2_Bps: float
    tile_overhead_s: float
    hbm_Bps: float
    """Achievable HBM bytes/s (peak·η_hbm)."""
    precision: Precision
    bytes_in: float

    @classmethod
    @lru_cache(maxsize=256)
    def of(cls, gpu: GPUSpec, precision: Precision, model: GemmTileModel,
           hbm_efficiency: float) -> GemmRates:
        """Rates of ``gpu`` at ``precision`` (memoized: one per GPU, precision, calibration)."""
        clock, sms = matrix_clock_Hz(gpu), sm_count(gpu)
        eff = model.mma_efficiency_fp8 if GEMM_CLASS[precision] == "fp8" else \
            model.mma_efficiency_bf16
        b_in = bytes_per_element(precision)
        return cls(
            sms=sms, clock_Hz=clock, sm_flops=per_sm_matrix_flops(gpu, precision) * eff,
            sm_load_Bps=model.sm_load_bytes_per_clock * clock,
            l2_Bps=model.l2_bytes_per_clock_per_sm * sms * clock,
            tile_overhead_s=model.tile_overhead_cycles / clock,
            hbm_Bps=gpu.hbm_bandwidth_Bps * hbm_efficiency,
            precision=precision, bytes_in=b_in,
        )


@dataclass(frozen=True)
class GemmCandidateTimes:
    """Times of the candidates (leading axis) for every shape (trailing axes), seconds."""

    waves_s: Floats
    """Tile waves: max(matrix, loads, L2) per wave + fixed tile cycles."""
    mma_s: Floats
    """Matrix time alone over the same waves (the compute-bound part)."""
    memory_s: Floats
    """Loads/L2 over the same waves, or the HBM floor, whichever is longer."""
    hbm_s: Floats
    """HBM floor: compulsory bytes + split-K partials at achievable bandwidth."""
    waves: Floats
    units: Floats
    slots: Floats

    @property
    def total_s(self) -> Floats:
        return np.maximum(self.waves_s, self.hbm_s)


def gemm_candidate_times(
    rates: GemmRates, output_tiles: Floats, compulsory_bytes: Floats, k: Floats,
    tile_m: Floats, tile_n: Floats, tile_sms: Floats, split_k: Floats,
) -> GemmCandidateTimes:
    """Times of a GEMM (or grouped GEMM) of ``output_tiles`` T_m×T_n tiles, depth k, split
    ``split_k`` ways (formulas: module doc); tile parameters may be arrays of candidates."""
    units = np.multiply(output_tiles, split_k)
    slots = np.maximum(np.floor_divide(rates.sms, tile_sms), 1)
    k_unit = ceil_div(k, split_k)
    t_mma = 2.0 * tile_m * tile_n * k_unit / (tile_sms * rates.sm_flops)
    unit_bytes = (tile_m + tile_n) * k_unit * rates.bytes_in
    t_load = unit_bytes / (tile_sms * rates.sm_load_Bps)

    def wave(active: Floats) -> Floats:
        return np.maximum(np.maximum(t_mma, t_load), active * unit_bytes / rates.l2_Bps) \
            + rates.tile_overhead_s

    def memory_wave(active: Floats) -> Floats:
        return np.maximum(t_load, active * unit_bytes / rates.l2_Bps)

    partial_bytes = np.where(split_k > 1, 2.0 * units * tile_m * tile_n * PARTIAL_BYTES, 0.0)
    hbm = memory_time_s(np.add(compulsory_bytes, partial_bytes), rates.hbm_Bps, 1.0)
    waves = num_waves(units, slots)
    return GemmCandidateTimes(
        waves_s=wave_quantized_time_s(units, slots, wave),
        mma_s=waves * t_mma,
        memory_s=np.maximum(wave_quantized_time_s(units, slots, memory_wave), hbm),
        hbm_s=hbm, waves=waves, units=units, slots=slots,
    )


@dataclass(frozen=True)
class GemmPlan:
    """The chosen candidate for each shape (arrays broadcast with the shape)."""

    time_s: Floats
    """Kernel time including launch, seconds."""
    tile_m: Floats
    tile_n: Floats
    split_k: Floats
    waves: Floats
    bound: np.ndarray
    """'compute', 'memory' (HBM, L2 or SM loads) or 'launch' per shape."""


TileCounter = Callable[[np.ndarray, np.ndarray], Floats]
"""(T_m, T_n) candidate arrays -> output tiles of the GEMM(s) being planned."""


@lru_cache(maxsize=64)
def _candidate_grid(model: GemmTileModel) -> np.ndarray:
    """(T_m, T_n, SMs per tile, split-K) of every candidate, one row each (per calibration)."""
    grid = np.array([(t.tile_m, t.tile_n, t.sms, s) for t in model.tiles for s in model.split_k],
                    dtype=float)
    grid.flags.writeable = False
    return grid


def _candidates(
    rates: GemmRates, count_tiles: TileCounter, compulsory_bytes: Floats, k: Floats,
    model: GemmTileModel, ndim: int,
) -> tuple[np.ndarray, GemmCandidateTimes, np.ndarray]:
    """Candidate grid on a leading axis (``ndim`` = dimensions of the shapes), their times, and
    their totals with disallowed split-K candidates (tiles·k_s over one wave) set to inf."""
    grid = _candidate_grid(model).reshape((-1, 4) + (1,) * ndim)
    tile_m, tile_n, tile_sms, split = grid[:, 0], grid[:, 1], grid[:, 2], grid[:, 3]
    times = gemm_candidate_times(rates, count_tiles(tile_m, tile_n), compulsory_bytes, k,
                                 tile_m, tile_n, tile_sms, split)
    allowed = (split == 1) | (times.units <= times.slots)
    return grid, times, np.where(allowed, times.total_s, np.inf)


def best_tile_time_s(
    rates: GemmRates, count_tiles: TileCounter, compulsory_bytes: Floats, k: Floats,
    model: GemmTileModel, launch_overhead_s: float, ndim: int,
) -> Floats:
    """Time of the fastest (tile, split-K) per shape, launch included: ``plan_tiles(...).time_s``
    without choosing the tile's other fields (the min of the same totals)."""
    return np.min(_candidates(rates, count_tiles, compulsory_bytes, k, model, ndim)[2],
                  axis=0) + launch_overhead_s


def plan_tiles(
    rates: GemmRates, count_tiles: TileCounter, compulsory_bytes: Floats, k: Floats,
    model: GemmTileModel, launch_overhead_s: float, ndim: int,
) -> GemmPlan:
    """Fastest (tile, split-K) per shape and its time (module doc), plus what bounds it.

    All candidates are evaluated at once on a leading axis (``ndim`` = dimensions of the
    shapes). Split-K k_s > 1 is allowed only where tiles·k_s fits in one wave. The bound is
    'launch' when the launch overhead exceeds the rest, 'compute' when the matrix time is at
    least the load/L2/HBM time, else 'memory'.
    """
    grid, times, totals = _candidates(rates, count_tiles, compulsory_bytes, k, model, ndim)
    tile_m, tile_n, split = grid[:, 0], grid[:, 1], grid[:, 3]
    best = np.argmin(totals, axis=0)[None]

    def pick(values: Floats) -> np.ndarray:
        return np.take_along_axis(np.broadcast_to(values, totals.shape), best, axis=0)[0]

    time = pick(totals)
    bound = np.where(launch_overhead_s > time, "launch",
                     np.where(pick(times.mma_s) >= pick(times.memory_s), "compute", "memory"))
    return GemmPlan(time_s=time + launch_overhead_s, tile_m=pick(tile_m), tile_n=pick(tile_n),
                    split_k=pick(split), waves=pick(times.waves), bound=bound)


def _batched_gemm(
    gpu: GPUSpec, m: Floats, n: Floats, k: Floats, batch: Floats, precision: Precision,
    model: GemmTileModel, hbm_efficiency: float,
) -> tuple[GemmRates, TileCounter, Floats, Floats]:
    """Rates, tile counter, compulsory bytes and depth of ``batch`` equal GEMMs."""
    return (GemmRates.of(gpu, precision, model, hbm_efficiency),
            lambda tm, tn: num_tiles(m, n, tm, tn, batch), gemm_bytes(m, n, k, batch, precision), k)


def plan_gemm(
    gpu: GPUSpec, m: Floats, n: Floats, k: Floats, batch: Floats, precision: Precision,
    model: GemmTileModel, hbm_efficiency: float, launch_overhead_s: float,
) -> GemmPlan:
    """``batch`` equal GEMMs C[m,n] = A[m,k]·B[k,n] (batched, or grouped with equal groups)."""
    return plan_tiles(*_batched_gemm(gpu, m, n, k, batch, precision, model, hbm_efficiency),
                      model, launch_overhead_s, np.broadcast(m, n, k, batch).ndim)


def gemm_time_s(
    gpu: GPUSpec, m: Floats, n: Floats, k: Floats, batch: Floats, precision: Precision,
    model: GemmTileModel, hbm_efficiency: float, launch_overhead_s: float,
) -> Floats:
    """``plan_gemm(...).time_s`` alone, seconds: the same candidates' fastest total, without
    recording which tile won (the path of the kernel backends and the search)."""
    return best_tile_time_s(*_batched_gemm(gpu, m, n, k, batch, precision, model, hbm_efficiency),
                            model, launch_overhead_s, np.broadcast(m, n, k, batch).ndim)


def plan_grouped_gemm(
    gpu: GPUSpec, tokens_per_expert: Floats, n: Floats, k: Floats, precision: Precision,
    model: GemmTileModel, hbm_efficiency: float, launch_overhead_s: float,
) -> GemmPlan:
    """One grouped GEMM over experts with ``tokens_per_expert`` rows each (last axis = experts).

    Tiles = Σ_e ⌈m_e/T_m⌉·⌈n/T_n⌉ share the waves (CUTLASS grouped GEMM, DeepGEMM
    m-grouped contiguous layout), so an imbalanced routing pays for its padding and its
    biggest experts; bytes = Σ_e compulsory bytes (every expert reads its own weights).
    """
    m = np.asarray(tokens_per_expert, dtype=float)
    rates = GemmRates.of(gpu, precision, model, hbm_efficiency)
    return plan_tiles(
        rates,
        lambda tm, tn: np.sum(num_tiles(m, np.expand_dims(n, -1), tm[..., None], tn[..., None]),
                              axis=-1),
        np.sum(gemm_bytes(m, np.expand_dims(n, -1), np.expand_dims(k, -1), 1, precision),
               axis=-1),
        k, model, launch_overhead_s, np.broadcast(m[..., 0], n, k).ndim)
