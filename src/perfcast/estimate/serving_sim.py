"""Discrete-event simulation of a request stream through an engine's step scheduler.

The engine runs steps back to back (Yu et al., Orca, OSDI 2022: iteration-level scheduling).
Each step decodes one token for every running sequence and/or prefills prompt chunks:

* ``mixed`` policy (vLLM V1, TensorRT-LLM in-flight batching): every step carries all running
  decodes; the rest of the token budget goes to prompt chunks, first the request already being
  prefilled, then newly admitted ones (FCFS); a request's chunk is at most
  ``EngineConfig.max_chunk_tokens`` (its rank's budget under attention DP: the ranks prefill
  their own requests side by side). Without chunked prefill a prompt must fit whole, except
  the step's first prompt, which always runs (else decodes would starve long prompts).
* ``prefill_first`` policy (SGLang): while prompts wait and can be admitted, a step prefills up
  to the budget and decodes nothing; otherwise a decode-only step runs.

Admission happens at step boundaries, when the scheduler forms a batch: a request that arrives
while a step runs waits for it to end, and an engine with an overlap scheduler (SGLang, vLLM
async scheduling, the TensorRT-LLM PyTorch executor; not NIM's prebuilt TensorRT engines)
forms batch N+1 while batch N is still on the GPU, so a request joins only a batch formed
after it arrived (``admission_open``): about one step of waiting
without overlap, two with it (SGLang zero-overhead batch scheduler, LMSYS blog 2024-12-04:
"the CPU schedules the next batch while the GPU runs the current one"; vLLM
``--async-scheduling``, frameworks.md §5). A closed-loop client sends its next request after
it receives the last token of the previous one, so that request always misses the batch
already formed. An idle engine admits an arrival at once.

Multi-step scheduling (vLLM V0 ``--num-scheduler-steps N``): the engine calls the scheduler
only when the current decode batch has run its N steps ("Skip the scheduler if there are any
remaining steps in the seq groups. This ensures that the scheduler is only called again when
the current batch has completed", vLLM@0.6.3.post1 engine/llm_engine.py L1335-1342), so a
waiting prompt is admitted at the next multiple of N decode steps since the last scheduling;
a prompt step is a single step. A request that finishes inside the run gets its last token
then (outputs streamed per step, ``multi_step_stream_outputs``). SGLang's
``--scheduler-recv-interval N`` admits the same way: its scheduler reads new requests only
after N decode steps since the last read, or right after a prefill step (SGL@0.5.12
managers/scheduler_recv_skipper.py: a decode step weighs 1, a prefill step 1000 against the
threshold N).

KV admission: a request enters while fewer than ``max_running_seqs`` run and the KV pool has room:
``reserve_full`` engines (TensorRT-LLM GUARANTEED_NO_EVICT) hold the pages of every admitted
request's full length; ``on_demand`` engines (vLLM PagedAttention, Kwon et al. 2023 §4.2;
SGLang) need only the new prompt's pages beside the tokens cached now. Preemption is not
modelled: an on-demand pool may overrun by the decode growth of the admitted requests.

Speed: between events (a finish, an arrival, a step with prefill) the decode batch is fixed and
its KV grows by b tokens a step, so a run of n decode-only steps is priced at once by the
trapezoid rule over its first and last step (step time is smooth in the KV length). Events per
request are O(1) (arrival, ⌈prompt/budget⌉ prefill steps, finish), each O(log b) (heap).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from perfcast.catalog.serving_engines import EngineConfig
from perfcast.estimate.serving_step_cost import StepCost
from perfcast.specs.serving import ServingWorkload


@dataclass(frozen=True)
class SimulatedRun:
    """Per-request times of one simulated run (seconds from the start) and step gaps."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    gap_s: np.ndarray
    """Inter-token gaps seen by decoding requests (one per run of steps)."""
    gap_weight: np.ndarray
    """Tokens produced with each gap (its weight in ITL statistics)."""
    num_steps: int


def sample_lengths(w: ServingWorkload, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Input and output lengths: fixed, uniform integers in [ratio·L, L], or measured pairs
    drawn uniformly with replacement (``ServingWorkload.length_samples``)."""
    n = w.num_requests
    if w.length_samples is not None:
        pick = rng.integers(0, len(w.length_samples), size=n)
        ins = np.array([x.input_len for x in w.length_samples])
        outs = np.array([x.output_len for x in w.length_samples])
        return ins[pick], outs[pick]
    if w.length_range_ratio >= 1.0:
        return np.full(n, w.input_len), np.full(n, w.output_len)
    def draw(top: int) -> np.ndarray:
        low = max(1, int(top * w.length_range_ratio))
        return rng.integers(low, top + 1, size=n)
    return draw(w.input_len), draw(w.output_len)


def arrival_times(w: ServingWorkload, rng: np.random.Generator) -> np.ndarray | None:
    """Open-loop Poisson arrivals (cumulative exponential gaps), t = 0 for offline, None for
    closed loop (each arrival is the finish of the client's previous request)."""
    if w.mode == "request_rate" and w.request_rate_per_s is not None:  # the spec requires it
        return np.cumsum(rng.exponential(1.0 / w.request_rate_per_s, w.num_requests))
    if w.mode == "offline":
        return np.zeros(w.num_requests)
    return None


def admission_open(arrival_s: float, now_s: float, last_step_s: float, overlap: bool,
                   idle: bool) -> bool:
    """Whether a request that arrived at ``arrival_s`` can join the batch that starts at
    ``now_s`` (module docstring). The batch was formed at ``now_s`` or, with an overlap
    scheduler, when the previous step (``last_step_s`` long) started; it takes only requests
    that arrived before that. An idle engine forms its batch when the request arrives."""
    if idle:
        return arrival_s <= now_s
    formed_s = now_s - last_step_s if overlap else now_s
    return arrival_s < formed_s


def simulate(w: ServingWorkload, cost: StepCost, engine: EngineConfig, kv_pool_tokens: int,
             block_tokens: int, concurrency: int | None = None) -> SimulatedRun:
    """Run ``w`` through one engine replica (``concurrency`` overrides ``w.concurrency``)."""
    rng = np.random.default_rng(w.seed)
    ins, outs = sample_lengths(w, rng)
    opened = arrival_times(w, rng)
    n = w.num_requests
    in_l, out_l = ins.tolist(), outs.tolist()
    need = [int(math.ceil((i + o) / block_tokens) * block_tokens) for i, o in zip(in_l, out_l, strict=True)]
    arrival = [0.0] * n
    first = [0.0] * n
    finish = [0.0] * n
    done_prefill = [0] * n
    joined = [0] * n
    waiting: deque[int] = deque()
    next_arrival = 0
    if opened is not None:
        open_times = opened.tolist()
    else:
        clients = min(concurrency or w.concurrency or 1, n)
        for r in range(clients):
            waiting.append(r)
        next_arrival = clients
    prefilling: deque[int] = deque()
    heap: list[tuple[int, int]] = []
    t = 0.0
    decode_count = 0
    kv_total = 0.0
    reserved = 0
    running = 0
    finished = 0
    budget, max_seqs = engine.token_budget_per_step, engine.max_running_seqs
    chunk_cap = engine.max_chunk_tokens or budget  # a request's chunk per step (attention DP)
    chunked, mixed = engine.chunked_prefill, engine.scheduler_policy == "mixed"
    gaps: list[float] = []
    weights: list[float] = []
    steps = 0

    reserve_full = engine.kv_admission == "reserve_full"
    prompt_pages = [int(math.ceil(i / block_tokens) * block_tokens) for i in in_l]
    prefill_held = 0

    overlap = engine.overlap_scheduler
    last_step_s = 0.0
    run_steps = max(int(engine.scheduler_steps), 1)
    run_pos = 0  # decode steps since the scheduler last ran (multi-step scheduling)

    def fits(r: int) -> bool:
        if running >= max_seqs:
            return False
        if reserve_full:
            return reserved + need[r] <= kv_pool_tokens
        return kv_total + prefill_held + prompt_pages[r] <= kv_pool_tokens

    def admissible(r: int, prefills_pending: int | None = None,
                   formed_idle: bool = False) -> bool:
        """``r`` may join the batch being formed: it fits, and it arrived before the batch was
        formed (an engine idle when the batch formed takes every request arrived by now)."""
        pending = len(prefilling) if prefills_pending is None else prefills_pending
        idle = formed_idle or (not heap and not pending)
        return fits(r) and admission_open(arrival[r], t, last_step_s, overlap, idle)

    while finished < n:
        if opened is not None:
            while next_arrival < n and open_times[next_arrival] <= t:
                arrival[next_arrival] = open_times[next_arrival]
                waiting.append(next_arrival)
                next_arrival += 1
        b = len(heap)
        scheduling = run_pos == 0 or b == 0
        can_prefill = scheduling and (
            bool(prefilling) or (bool(waiting) and admissible(waiting[0])))
        if not can_prefill:
            if b == 0:
                if opened is None or next_arrival >= n:
                    if waiting:  # a request larger than the whole pool never runs
                        raise ValueError(f"request of {need[waiting[0]]} tokens exceeds the KV "
                                         f"pool of {kv_pool_tokens} tokens")
                    break
                t = max(t, open_times[next_arrival])
                continue
            steps_left = heap[0][0] - decode_count
            if waiting and fits(waiting[0]):
                # it joins a batch formed after its arrival, a step or two on (or at the end of
                # the multi-step run)
                steps_left = min(steps_left, run_steps - run_pos) if run_pos else 1
            t0 = cost.decode_s(b, kv_total)
            if opened is not None and next_arrival < n:
                steps_left = max(1, min(steps_left, math.ceil((open_times[next_arrival] - t) / t0)))
            t1 = cost.decode_s(b, kv_total + b * (steps_left - 1)) if steps_left > 1 else t0
            duration = steps_left * 0.5 * (t0 + t1)
            last_step_s = t1
            gaps.append(duration / steps_left)
            weights.append(b * steps_left)
            t += duration
            decode_count += steps_left
            kv_total += b * steps_left
            steps += steps_left
            run_pos = (run_pos + steps_left) % run_steps
        else:
            decoding = b if mixed else 0
            room = budget - decoding
            chunk_tokens = 0
            attn = 0.0
            completed: list[int] = []
            index = 0  # the next request in ``prefilling`` to give tokens to
            formed_idle = not heap and not prefilling
            while room > 0:
                if index < len(prefilling):
                    r = prefilling[index]
                elif waiting and admissible(waiting[0], len(prefilling) - len(completed),
                                            formed_idle):
                    r = waiting.popleft()
                    running += 1
                    reserved += need[r]
                    prefill_held += prompt_pages[r]
                    prefilling.append(r)
                else:
                    break
                left = in_l[r] - done_prefill[r]
                if not chunked and left > room and chunk_tokens:
                    break  # a whole prompt waits for the next step (the first one always runs)
                take = left if not chunked else min(left, room, chunk_cap)
                attn += cost.chunk_attention_s(done_prefill[r], take)
                done_prefill[r] += take
                chunk_tokens += take
                room -= take
                if done_prefill[r] >= in_l[r]:
                    completed.append(r)
                    index += 1
                elif take == chunk_cap and room > 0:
                    index += 1  # its rank's budget is spent; the next request runs on another rank
                else:
                    break
            for r in completed:
                prefilling.remove(r)
            duration = cost.mixed_s(decoding, kv_total if decoding else 0.0, chunk_tokens, attn,
                                    decoding + len(completed))
            run_pos = 0
            t += duration
            last_step_s = duration
            steps += 1
            if decoding:
                gaps.append(duration)
                weights.append(decoding)
                decode_count += 1
                kv_total += decoding
            for r in completed:
                first[r] = t
                prefill_held -= prompt_pages[r]
                if out_l[r] <= 1:
                    finish[r] = t
                    finished += 1
                    running -= 1
                    reserved -= need[r]
                    if opened is None and next_arrival < n:
                        arrival[next_arrival] = t
                        waiting.append(next_arrival)
                        next_arrival += 1
                    continue
                joined[r] = decode_count
                kv_total += in_l[r]
                heapq.heappush(heap, (decode_count + out_l[r] - 1, r))
        while heap and heap[0][0] <= decode_count:
            _, r = heapq.heappop(heap)
            finish[r] = t
            finished += 1
            running -= 1
            reserved -= need[r]
            kv_total -= in_l[r] + (decode_count - joined[r])
            if opened is None and next_arrival < n:
                arrival[next_arrival] = t
                waiting.append(next_arrival)
                next_arrival += 1
    return SimulatedRun(
        arrival_s=np.asarray(arrival), first_token_s=np.asarray(first),
        finish_s=np.asarray(finish), input_len=ins, output_len=outs,
        gap_s=np.asarray(gaps), gap_weight=np.asarray(weights, dtype=float), num_steps=steps)
