"""How Megatron-Core splits a model's layers over pipeline stages and virtual chunks.

Three ways, in Megatron-Core's order of precedence (frameworks.md §1.2; Megatron-LM
``TransformerConfig`` fields ``pipeline_model_parallel_layout``,
``num_layers_in_first/last_pipeline_stage``, ``account_for_embedding/loss_in_pipeline_split``
and ``get_transformer_layer_offset``):

1. ``--pipeline-model-parallel-layout``: an explicit string, one segment per virtual stage,
   ``|`` between segments; ``E`` embedding, ``t`` decoder layer, ``m`` MTP module, ``L`` loss;
   ``x*N`` repeats one symbol, ``(...)*N`` repeats a group; commas are ignored
   (e.g. ``Et*3|(tt|)*29,m|L``). Segment ``i`` is virtual chunk ``i // pp`` of rank
   ``i % pp`` (Megatron's layout list is vpp-major). Segments may hold no layer.
2. ``--decoder-first/last-pipeline-num-layers``: the first / last rank hold the stated layers;
   the other ranks split the rest evenly (Megatron asserts it divides); each rank's layers
   split evenly over its vpp chunks.
3. ``--account-for-embedding/loss-in-pipeline-split``: the embedding / loss count as one layer
   each; L + extras split evenly over pp·vpp chunks (Megatron asserts it divides) and the first
   / last chunk hold one layer fewer.

Otherwise the layers split evenly over pp·vpp chunks when that divides; else (a split Megatron
would refuse, kept for sweeps and published rows that do not state their layout) evenly over
ranks with the extra layers on the middle ranks first, each rank's over its chunks.
"""

from __future__ import annotations

import re

from perfcast.errors import InputError

LAYOUT_SYMBOLS = frozenset("Etm L|")


def parse_pipeline_layout(text: str) -> tuple[str, ...]:
    """Segments of a Megatron layout string, each a string over ``E t m L``.

    Raises ``ValueError`` naming the text when it holds other symbols or no decoder layer.
    """
    flat = text.replace(",", "").replace(" ", "")
    group = re.compile(r"\(([^()]*)\)\*(\d+)")
    while group.search(flat):
        flat = group.sub(lambda m: m.group(1) * int(m.group(2)), flat)
    flat = re.sub(r"([EtmL|])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), flat)
    bad = set(flat) - LAYOUT_SYMBOLS
    if bad:
        raise ValueError(f"pipeline_layout={text!r}: symbols {''.join(sorted(bad))!r} not "
                         "understood (E embedding, t layer, m MTP, L loss, | stage split, "
                         "x*N and (...)*N repeats)")
    segments = tuple(flat.split("|"))
    if not any("t" in s for s in segments):
        raise ValueError(f"pipeline_layout={text!r} holds no decoder layer 't'")
    return segments


def even_stage_counts(num_layers: int, pp: int) -> list[int]:
    """Layer count of each rank for an uneven-by-remainder split (sum = num_layers): the extra
    layers go to the middle ranks first, keeping the embedding/head ranks light."""
    base, extra = divmod(num_layers, pp)
    counts = [base] * pp
    order = list(range(1, pp - 1)) + [pp - 1, 0] if pp > 2 else list(range(pp))[::-1]
    for stage in order[:extra]:
        counts[stage] += 1
    return counts


def _split(total: int, parts: int, field: str, value: object, what: str) -> list[int]:
    if parts <= 0 or total % parts != 0:
        raise InputError(field, value, f"{what}: {total} layers do not split evenly over "
                         f"{parts} chunks (Megatron-Core asserts an even split)")
    return [total // parts] * parts


def has_custom_split(strategy) -> bool:
    """Whether ``strategy`` states its pipeline split (layout, first/last stage layers or the
    embedding/loss accounting) rather than taking the default."""
    return (getattr(strategy, "pipeline_layout", None) is not None
            or getattr(strategy, "num_layers_in_first_pipeline_stage", None) is not None
            or getattr(strategy, "num_layers_in_last_pipeline_stage", None) is not None
            or bool(getattr(strategy, "account_for_embedding_in_pipeline_split", False))
            or bool(getattr(strategy, "account_for_loss_in_pipeline_split", False)))


def _one_size(value) -> int:
    """A pipeline size as an int: a Python or numpy integer, or an array holding one value
    (a search block's vpp, possibly broadcast over its rows)."""
    if not hasattr(value, "ravel"):
        return int(value)
    values = set(value.ravel().tolist())
    if len(values) != 1:
        raise ValueError(f"a stated pipeline split needs one vpp; got {sorted(values)}")
    return int(values.pop())


def chunk_layer_counts(num_layers: int, strategy) -> list[int]:
    """Decoder layers of each virtual pipeline chunk, vpp-major (index = chunk·pp + rank);
    sum = ``num_layers``. Raises ``InputError`` for a layout Megatron-Core refuses.

    ``strategy`` may be a search block (``search.space.StrategyBlock``) whose vpp is an
    array of one value: the search gives each stated split a block of one vpp
    (``LayoutRules.split_groups``)."""
    pp, vpp = _one_size(strategy.pp), _one_size(strategy.vpp)
    chunks = pp * vpp
    if strategy.pipeline_layout is not None:
        segments = parse_pipeline_layout(strategy.pipeline_layout)
        if len(segments) != chunks:
            raise InputError("pipeline_layout", strategy.pipeline_layout,
                             f"has {len(segments)} stages; pp*vpp={chunks}")
        counts = [s.count("t") for s in segments]
        if sum(counts) != num_layers:
            raise InputError("pipeline_layout", strategy.pipeline_layout,
                             f"places {sum(counts)} decoder layers; the model has {num_layers}")
        return counts
    first, last = strategy.num_layers_in_first_pipeline_stage, strategy.num_layers_in_last_pipeline_stage
    if first is not None or last is not None:
        fixed = (first or 0) + (last or 0)
        middle_ranks = pp - (first is not None) - (last is not None)
        rest = num_layers - fixed
        if rest < 0 or (middle_ranks == 0 and rest != 0):
            raise InputError("num_layers_in_first_pipeline_stage", first,
                             f"first={first}, last={last} do not leave {num_layers} layers for "
                             f"{middle_ranks} other stages")
        middle = rest // middle_ranks if middle_ranks else 0
        if middle_ranks:
            _split(rest, middle_ranks, "num_layers_in_first_pipeline_stage", first,
                   "the middle pipeline stages")
        per_rank = [middle] * pp
        if first is not None:
            per_rank[0] = first
        if last is not None:
            per_rank[-1] = last
        by_rank = [_split(n, vpp, "vpp", vpp, f"stage {r}") for r, n in enumerate(per_rank)]
        return [by_rank[r][c] for c in range(vpp) for r in range(pp)]
    extra_first = int(strategy.account_for_embedding_in_pipeline_split)
    extra_last = int(strategy.account_for_loss_in_pipeline_split)
    if extra_first or extra_last:
        counts = _split(num_layers + extra_first + extra_last, chunks,
                        "account_for_embedding_in_pipeline_split", True,
                        "layers with the embedding/loss counted as layers")
        counts[0] -= extra_first
        counts[-1] -= extra_last
        return counts
    if num_layers % chunks == 0:
        return [num_layers // chunks] * chunks
    # Not an even split: each rank keeps its remainder split, over its chunks earliest first.
    per_rank = even_stage_counts(num_layers, pp)
    by_rank = [[n // vpp + (c < n % vpp) for c in range(vpp)] for n in per_rank]
    return [by_rank[r][c] for c in range(vpp) for r in range(pp)]


def stage_layer_indices(num_layers: int, strategy) -> list[tuple[int, ...]]:
    """Global decoder-layer indices held by each pipeline rank (chunks in model order:
    chunk c of rank r follows chunk c of rank r − 1). Every layer appears exactly once."""
    pp = strategy.pp
    counts = chunk_layer_counts(num_layers, strategy)
    held: list[list[int]] = [[] for _ in range(pp)]
    start = 0
    for index, count in enumerate(counts):
        held[index % pp].extend(range(start, start + count))
        start += count
    return [tuple(layers) for layers in held]
