"""Shape grids measured by ``perfcast profile`` (no torch here)."""

from __future__ import annotations

from itertools import product
from typing import Final

GEMM_SIZES: Final[tuple[int, ...]] = (16, 128, 512, 1024, 2048, 4096, 8192)
"""m (tokens), n and k (hidden/FFN widths) of the GEMM grid: decode to large-training shapes."""

ATTENTION_SEQS: Final[tuple[int, ...]] = (512, 1024, 2048, 4096, 8192)
ATTENTION_HEAD_DIMS: Final[tuple[int, ...]] = (64, 128)
ATTENTION_TOKENS: Final[int] = 16384
"""batch·seq per attention shape, as in the FlashAttention benchmarks (hidden 2048)."""

MEMORY_BYTES: Final[tuple[float, ...]] = (2**20, 2**24, 2**27, 2**30)


def gemm_shapes(quick: bool = False) -> list[tuple[int, int, int]]:
    """(m, n, k) of the GEMM grid; ``quick`` keeps every other size."""
    sizes = GEMM_SIZES[::2] if quick else GEMM_SIZES
    return [(m, n, k) for m, n, k in product(sizes, sizes[2:] or sizes, sizes[2:] or sizes)]


def attention_shapes(quick: bool = False) -> list[tuple[int, int, int, int]]:
    """(batch, heads, seq, head_dim) with batch·seq = 16k tokens and heads·head_dim = 2048."""
    seqs = ATTENTION_SEQS[::2] if quick else ATTENTION_SEQS
    return [(ATTENTION_TOKENS // s, 2048 // d, s, d) for s in seqs for d in ATTENTION_HEAD_DIMS]
