"""Measured request lengths from a serving benchmark's saved result (``--length-samples``).

vLLM ``benchmarks/benchmark_serving.py --save-result`` writes one JSON object whose
``input_lens`` and ``output_lens`` lists hold each completed request's prompt and generated
token counts (SGLang ``bench_serving --output-file`` writes the same two keys). Read as
``LengthSample`` pairs they let the simulation run the dataset's length distribution
(``ServingWorkload.length_samples``) instead of fixed means.
"""

from __future__ import annotations

import json
from pathlib import Path

from perfcast.errors import InputError
from perfcast.specs.serving import LengthSample

_FIELD = "length_samples"


def _counts(data: dict[str, object], key: str, path: Path) -> list[int]:
    values = data.get(key)
    if not isinstance(values, list) or not values:
        raise InputError(_FIELD, str(path), f"needs a non-empty list '{key}'")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        raise InputError(_FIELD, str(path), f"'{key}' must hold positive integer token counts")
    return values


def load_length_samples(path: Path) -> tuple[LengthSample, ...]:
    """(prompt, output) pairs of every request in a saved benchmark result (module docstring)."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(_FIELD, str(path), f"cannot be read ({exc.strerror})") from None
    except ValueError:
        raise InputError(_FIELD, str(path), "is not JSON") from None
    if not isinstance(data, dict):
        raise InputError(_FIELD, str(path), "must be a JSON object with input_lens and output_lens")
    ins, outs = _counts(data, "input_lens", path), _counts(data, "output_lens", path)
    if len(ins) != len(outs):
        raise InputError(_FIELD, str(path), f"input_lens has {len(ins)} entries, "
                                            f"output_lens {len(outs)}")
    return tuple(LengthSample(input_len=i, output_len=o) for i, o in zip(ins, outs, strict=True))
