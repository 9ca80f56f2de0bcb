"""``perfcast infer --concurrency / --request-rate / --offline``: build the serving workload from
the flags, run ``estimate_serving`` and print it (fits / does not fit first).

The engine profile replaces ``--batching``, ``--prefill-chunk`` and ``--cuda-graphs``;
offloading and speculative decoding are not simulated and are refused.
``--scheduler-recv-interval N`` replaces the engine's admission interval
(``EngineConfig.scheduler_steps``: new requests join only every N decode steps, SGLang
``--scheduler-recv-interval`` / vLLM V0 ``--num-scheduler-steps``); SGLang's receive skipper
refuses attention DP (SGL@0.5.12 managers/scheduler_recv_skipper.py: ``assert not
server_args.enable_dp_attention``), and so does this option with ``--engine sglang``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfcast.errors import InputError

if TYPE_CHECKING:  # imported lazily at run time (``perfcast --help`` stays light)
    from pathlib import Path

    from perfcast.estimate.inference import InferenceOptions
    from perfcast.specs.hardware import SystemSpec
    from perfcast.specs.model import ModelSpec
    from perfcast.specs.strategy import Strategy


def run_serving(model: ModelSpec, system: SystemSpec, strategy: Strategy,
                options: InferenceOptions, *, concurrency: int | None,
                request_rate: float | None, offline: bool, num_requests: int | None,
                input_len: int, output_len: int, length_range_ratio: float,
                warmup_requests: int, engine: str, engine_version: str | None,
                arrival_draws: int | None = None, length_samples: Path | None = None,
                scheduler_recv_interval: int | None = None, json: bool) -> None:
    from perfcast.calibration.bundle import load_calibration
    from perfcast.estimate.serving import estimate_serving
    from perfcast.kernels.backend import KernelBackendName
    from perfcast.specs.length_samples import load_length_samples
    from perfcast.specs.serving import serving_workload

    modes = [name for name, on in (("--concurrency", concurrency is not None),
                                   ("--request-rate", request_rate is not None),
                                   ("--offline", offline)) if on]
    if len(modes) > 1:
        raise InputError(modes[1], True, f"give one of --concurrency, --request-rate, --offline "
                         f"(got {' and '.join(modes)})")
    speculative, offload = options.get("speculative"), options.get("offload")
    if speculative is not None:
        raise InputError("draft_model", speculative.draft_model.name,
                         "speculative decoding is not simulated with --concurrency/--request-rate")
    if offload is not None and offload.any:
        raise InputError("offload", True, "offloading is not simulated with --concurrency/--request-rate")
    overrides: dict[str, object] = {}
    if scheduler_recv_interval is not None:
        if engine == "sglang" and options["attention_dp"]:
            raise InputError("scheduler_recv_interval", scheduler_recv_interval,
                             "SGLang's receive skipper does not run with attention DP")
        overrides["scheduler_steps"] = scheduler_recv_interval
    workload = serving_workload(concurrency=concurrency, request_rate=request_rate,
                                num_requests=num_requests, input_len=input_len,
                                output_len=output_len, length_range_ratio=length_range_ratio,
                                warmup_requests=warmup_requests,
                                arrival_draws=arrival_draws,
                                length_samples=(load_length_samples(length_samples)
                                                if length_samples is not None else None))
    cal = options.get("calibration") or load_calibration()
    report = estimate_serving(
        model, system, strategy, workload, engine=engine, engine_version=engine_version,
        precision=options["precision"], kv_precision=options["kv_precision"],
        weight_precision=options["weight_precision"], attention_dp=options["attention_dp"],
        engine_overrides=overrides or None,
        kernel_backend=options.get("kernel_backend") or KernelBackendName.ROOFLINE,
        calibration=cal)
    if json:
        from perfcast.report.json_out import to_json

        print(to_json(report.to_dict()))
        return
    from perfcast.report.console import make_console
    from perfcast.report.serving_text import render_serving

    render_serving(report, make_console())
