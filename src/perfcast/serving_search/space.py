"""The deployments ``perfcast infer-search`` enumerates: per-instance layouts and how instances
are combined (aggregated replicas, or disaggregated prefill/decode pools, "xPyD").

* An **instance layout** is one model replica: TP × PP GPUs, EP inside the TP group (``infer``:
  "ep must divide tp"), attention data parallelism (MoE models, tp > 1), weight/activation
  precision and KV-cache precision, each only where the GPU has the tensor cores for it
  (``GPUSpec.supports``). TP stays inside one scale-up domain (NVLink/xGMI), as every serving
  engine deploys it; PP may cross nodes.
* An **aggregated** deployment runs ``replicas`` = GPUs / (tp·pp) identical instances, each
  prefilling and decoding its share of ``concurrency`` closed-loop clients (``perfcast infer
  --gpus N --tp .. --pp .. --concurrency C``).
* A **disaggregated** deployment (Zhong et al., "DistServe", OSDI 2024; Patel et al.,
  "Splitwise", ISCA 2024) runs x prefill instances and y decode instances, x·gpus_p + y·gpus_d =
  GPUs; prefill and decode share the checkpoint, so precision and KV format are the same on both
  pools (the KV is shipped as it is cached). Each decode instance holds ``decode_batch``
  sequences.

Concurrency and decode batch take powers of two up to ``MAX_SEARCH_CONCURRENCY`` per instance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy

MAX_SEARCH_CONCURRENCY = 1024
"""Largest clients per instance the search tries (vLLM ``max_num_seqs`` defaults to 256–1024;
TensorRT-LLM max-throughput recipes run 896–1024 per rank)."""

PRECISIONS: tuple[Literal["bf16", "fp8", "fp4"], ...] = ("bf16", "fp8", "fp4")
"""Weight/activation formats tried, each where the GPU supports it."""
KV_PRECISIONS: tuple[Literal["bf16", "fp8"], ...] = ("bf16", "fp8")
"""KV-cache formats tried (``infer --kv-precision``)."""

Mode = Literal["aggregated", "disaggregated"]


@dataclass(frozen=True)
class InstanceLayout:
    """One model instance: parallel layout and number formats."""

    tp: int
    pp: int
    ep: int
    attention_dp: bool
    precision: str
    """Weights and activations (``infer --precision``)."""
    kv_precision: str

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    def strategy(self, num_gpus: int) -> Strategy:
        """The ``Strategy`` ``perfcast infer --gpus num_gpus --tp --pp --ep`` builds."""
        return Strategy(num_gpus=num_gpus, tp=self.tp, pp=self.pp, ep=self.ep,
                        etp=self.tp // self.ep if self.ep > 1 else None,
                        moe_token_dispatcher="alltoall")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Deployment:
    """A way to serve the model on the GPUs (module docstring)."""

    mode: Mode
    layout: InstanceLayout
    """Aggregated: every replica. Disaggregated: every decode instance."""
    instances: int
    """Aggregated: replicas. Disaggregated: decode instances (y)."""
    concurrency: int
    """Closed-loop clients in flight over the whole deployment (disaggregated: y × decode batch)."""
    prefill: InstanceLayout | None = None
    prefill_instances: int = 0
    """Disaggregated: prefill instances (x)."""

    @property
    def num_gpus(self) -> int:
        prefill = self.prefill.gpus * self.prefill_instances if self.prefill else 0
        return self.layout.gpus * self.instances + prefill

    @property
    def decode_batch(self) -> int:
        """Sequences per instance (aggregated: clients per replica)."""
        return self.concurrency // self.instances

    def to_dict(self) -> dict:
        if self.mode == "aggregated":
            return {"mode": self.mode, "num_gpus": self.num_gpus, "replicas": self.instances,
                    **self.layout.to_dict(), "concurrency": self.concurrency}
        assert self.prefill is not None
        return {"mode": self.mode, "num_gpus": self.num_gpus, "concurrency": self.concurrency,
                "prefill": {**self.prefill.to_dict(), "instances": self.prefill_instances},
                "decode": {**self.layout.to_dict(), "instances": self.instances,
                           "batch": self.decode_batch}}

    def label(self) -> str:
        """Short text: ``TP4 PP1 EP1 fp8/kv-fp8 x2 c64`` or ``2P(TP8) 1D(TP8 ADP) b256``."""
        def one(lay: InstanceLayout) -> str:
            parts = [f"TP{lay.tp}"] + ([f"PP{lay.pp}"] if lay.pp > 1 else []) + \
                ([f"EP{lay.ep}"] if lay.ep > 1 else []) + (["ADP"] if lay.attention_dp else [])
            return " ".join(parts)
        fmt = f"{self.layout.precision}/kv-{self.layout.kv_precision}"
        if self.mode == "aggregated":
            return f"{self.instances}x({one(self.layout)}) {fmt} c{self.concurrency}"
        assert self.prefill is not None
        return (f"{self.prefill_instances}P({one(self.prefill)}) {self.instances}D("
                f"{one(self.layout)}) {fmt} b{self.decode_batch}")

    def infer_args(self, model: str, system: str, input_len: int, output_len: int,
                   engine: str, calibration: str | None = None,
                   kernel_backend: str | None = None,
                   kernel_table: str | None = None) -> list[str]:
        """The ``perfcast infer`` arguments that forecast this (aggregated) deployment
        (``calibration``: the ``--calibration`` directory the search priced it with;
        ``kernel_backend`` / ``kernel_table``: its ``--kernel-backend`` / ``--kernel-table``,
        None for the default)."""
        lay = self.layout
        args = ["infer", "-m", model, "-s", system, "--gpus", str(self.num_gpus),
                "--tp", str(lay.tp), "--pp", str(lay.pp), "--ep", str(lay.ep),
                "--precision", lay.precision, "--kv-precision", lay.kv_precision,
                "--input-len", str(input_len), "--output-len", str(output_len),
                "--concurrency", str(self.concurrency), "--engine", engine]
        args += ["--calibration", calibration] if calibration is not None else []
        args += ["--kernel-backend", kernel_backend] if kernel_backend is not None else []
        args += ["--kernel-table", kernel_table] if kernel_table is not None else []
        return args + (["--attention-dp"] if lay.attention_dp else [])


def _powers_of_two(top: int) -> list[int]:
    out, v = [], 1
    while v <= top:
        out.append(v)
        v *= 2
    return out


def instance_layouts(model: ModelSpec, system: SystemSpec, max_gpus: int) -> list[InstanceLayout]:
    """Every layout of at most ``max_gpus`` GPUs (module docstring); validity against the model
    (heads, layers, experts) is checked when the layout is priced."""
    gpu = system.gpu
    precisions = [p for p in PRECISIONS if p == "bf16" or gpu.supports(p)]
    kvs = [k for k in KV_PRECISIONS if k == "bf16" or gpu.supports(k)]
    out = []
    for tp in _powers_of_two(min(max_gpus, system.scale_up_domain_gpus)):
        for pp in _powers_of_two(min(max_gpus // tp, model.num_hidden_layers)):
            eps = [e for e in _powers_of_two(tp) if tp % e == 0] if model.is_moe else [1]
            adps = (False, True) if model.is_moe and tp > 1 else (False,)
            for ep in eps:
                for adp in adps:
                    for prec in precisions:
                        for kv in kvs:
                            out.append(InstanceLayout(tp, pp, ep, adp, prec, kv))
    return out


def concurrency_levels(max_per_instance: int = MAX_SEARCH_CONCURRENCY) -> list[int]:
    """Clients (or decode batch) per instance tried: 1, 2, 4, … ``max_per_instance``."""
    return _powers_of_two(max_per_instance)
