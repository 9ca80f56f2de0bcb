"""KV-cache transfer from a prefill instance to a decode instance (disaggregated serving).

After prefill, the prompt's KV cache moves to the decode instance that will generate the rest
(DistServe, OSDI 2024 §4; NVIDIA Dynamo NIXL, Mooncake transfer engine): every prefill GPU sends
its shard of the cache to the decode GPUs that need it, all GPUs at once, so one GPU sends
bytes/(tp·pp) of

    bytes = kv_bytes_per_token(model, kv format, all layers, unsplit) × prompt tokens

as one point-to-point transfer (``comm.collectives.send_recv_time_s``: S/B + α). The link is
the scale-up domain when a prefill and a decode instance fit in one domain together (the
deployment places them side by side), else the scale-out NIC of each GPU
(``comm.placement.achievable_group_link``, calibrated efficiency per tier).
"""

from __future__ import annotations

from perfcast.comm.collectives import send_recv_time_s
from perfcast.comm.placement import achievable_group_link
from perfcast.memory.inference import kv_cache_bytes_per_token
from perfcast.serving_search.space import InstanceLayout
from perfcast.specs.dtypes import bytes_per_element
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec


def kv_transfer_bytes(model: ModelSpec, kv_precision: str, input_len: int) -> float:
    """Bytes of one prompt's KV cache, all layers, not split (module docstring)."""
    return kv_cache_bytes_per_token(model, 1, bytes_per_element(kv_precision)) * input_len


def kv_transfer_s(model: ModelSpec, system: SystemSpec, prefill: InstanceLayout,
                  decode: InstanceLayout, input_len: int) -> float:
    """Seconds to move one prompt's KV from a prefill to a decode instance."""
    bandwidth, latency = achievable_group_link(system, prefill.gpus + decode.gpus, 1)
    per_gpu = kv_transfer_bytes(model, prefill.kv_precision, input_len) / prefill.gpus
    return float(send_recv_time_s(per_gpu, 2, bandwidth, latency))
