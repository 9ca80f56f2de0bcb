"""Extra HBM traffic of element-wise ops run in PyTorch eager mode (no torch.compile).

The layer graph (``graph.layer``) counts each norm, activation and rotary embedding as one
fused kernel that reads its inputs and writes its output once: what Megatron-Core's Transformer
Engine / Apex fused kernels do, and what torch.compile's Inductor backend produces by fusing
chains of pointwise ops and reductions into single Triton kernels (Ansel et al., *PyTorch 2*,
ASPLOS 2024, §5 "TorchInductor": pointwise/reduction fusion; PyTorch docs, torch.compiler
"TorchInductor ... fuses operations"). In eager mode every PyTorch op of the chain is its own
kernel, which reads its input from HBM and writes its output back, and the intermediate
tensors are fp32 where the op upcasts. torchtitan runs eager unless ``compile.enable`` is set
(frameworks.md §3, TT2 job_config.py L721-728).

The eager op sequences, per element, 2-byte activations, fp32 intermediates (4 B):

- RMSNorm, ATen's composite ``rms_norm`` (aten/src/ATen/native/layer_norm.cpp, behind
  ``torch.nn.RMSNorm``; torchtitan's own ``RMSNorm._norm`` is the same chain): upcast
  (read 2, write 4), ``pow(2)`` (4+4), ``mean`` (read 4), ``x * rsqrt`` (4+4), ``type_as``
  (4+2), ``* weight`` (2+2) = 36 B against the fused kernel's 4 B (read x, write y).
- LayerNorm: ``native_layer_norm`` is one CUDA kernel in eager too: nothing extra.
- Gated MLP, torchtitan ``FeedForward``: ``w2(F.silu(w1(x)) * w3(x))``: ``silu`` (2+2) then the
  product (2+2+2) = 10 B per element of the MLP width against the fused 6 B (read gate and up,
  write the product). A plain GELU/ReLU is one kernel either way.
- Rotary embedding, torchtitan ``apply_rotary_emb`` (complex form): ``x.float()`` (2+4), the
  complex product with ``freqs_cis`` (4+4), ``type_as`` (4+2) = 20 B per Q/K element against
  the fused 4 B (read, rewrite in place).

The backward of each op is autograd's backward of the same eager chain; like every memory-bound
op of the graph it moves about twice the forward bytes (``graph.layer.backward_ops``).
"""

from __future__ import annotations

from typing import Final

from perfcast.graph.ops import MemoryOp, Phase
from perfcast.specs.dtypes import ACTIVATION_BYTES
from perfcast.specs.model import ModelSpec

EAGER_RMSNORM_BYTES_PER_ELEMENT: Final[float] = 36.0
"""HBM bytes per element of ATen's composite ``rms_norm`` in eager (module docstring)."""
FUSED_NORM_BYTES_PER_ELEMENT: Final[float] = 2 * ACTIVATION_BYTES
"""One fused norm kernel: read x, write y."""
EAGER_GATED_ACT_BYTES_PER_ELEMENT: Final[float] = 5 * ACTIVATION_BYTES
"""``silu(gate)`` then ``* up``: five 16-bit tensor passes per element of the MLP width."""
FUSED_GATED_ACT_BYTES_PER_ELEMENT: Final[float] = 3 * ACTIVATION_BYTES
"""One fused SwiGLU kernel: read gate and up, write the product."""
EAGER_ROTARY_BYTES_PER_ELEMENT: Final[float] = 20.0
"""torchtitan's complex-form RoPE in eager: upcast, complex product, downcast (docstring)."""
FUSED_ROTARY_BYTES_PER_ELEMENT: Final[float] = 2 * ACTIVATION_BYTES
"""One fused RoPE kernel: read Q/K, rewrite them in place."""


def eager_elementwise_ops(model: ModelSpec, tokens: float, norm_tokens: float, tp: int,
                          moe: bool) -> list[MemoryOp]:
    """Forward HBM bytes that eager mode moves beyond the fused kernels of one layer's norms,
    gated-MLP activation and rotary embedding, for ``tokens`` tokens on this rank
    (``norm_tokens``: tokens the norms see, ``tokens``/tp under sequence parallelism).
    MoE expert activations are left out (grouped-GEMM frameworks fuse them; not measured)."""
    h, ops = model.hidden_size, []
    if model.norm_type == "rmsnorm":
        extra = EAGER_RMSNORM_BYTES_PER_ELEMENT - FUSED_NORM_BYTES_PER_ELEMENT
        ops.append(MemoryOp("norm_eager", Phase.FORWARD, extra * norm_tokens * h,
                            count=model.norms_per_layer))
    if model.is_gated_mlp and not moe:
        extra = EAGER_GATED_ACT_BYTES_PER_ELEMENT - FUSED_GATED_ACT_BYTES_PER_ELEMENT
        ops.append(MemoryOp("mlp_activation_eager", Phase.FORWARD,
                            extra * tokens * model.intermediate_size / tp))
    if model.position_embedding == "rope" and not model.is_mla:
        qk_elements = tokens * (model.num_attention_heads + model.num_kv_heads) \
            * model.kv_channels / tp
        extra = EAGER_ROTARY_BYTES_PER_ELEMENT - FUSED_ROTARY_BYTES_PER_ELEMENT
        ops.append(MemoryOp("rotary_eager", Phase.FORWARD, extra * qk_elements))
    return ops
