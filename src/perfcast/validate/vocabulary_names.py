"""Free-text GPU/system and model names of published tables -> catalog slugs.

Part of the normalization layer (``perfcast.validate.vocabulary`` holds the other fields).
Both readers try a fixed list of respellings against the catalog indexes
(``perfcast.catalog.resolve.NameIndex``: case, punctuation and Hugging Face organisations are
already ignored there) and raise ``VocabularyError`` naming the column, the value and the
closest catalog names when nothing matches. They never fall back to a default.

GPU spellings (``gpu_type``): vendor words (NVIDIA, AMD, Instinct, Intel, Google), memory sizes
("80GB", "141GB"; a size selects the variant where the catalog has several, e.g. A100 40/80 GB),
power limits ("(700W)", "(500W power limit)"), form factors (SXM/SXM5/PCIe/NVL/OAM), HBM type
words, GPU counts ("x4") and system names ("DGX H100", "GB200 NVL72", "(DGX-GB300)",
"(Selene, DGX A100)", "(NVL72)"). A named system is used only when its GPU is the GPU the text
names; otherwise the GPU's default system (``systems.yaml`` ``default_for_gpu``).

Model spellings (``model``): parenthesised notes ("DeepSeek-R1 (671B MoE)"), release suffixes
(-Instruct, -Base, -Chat, -hf, -FP8, date tags such as -2507 / -0528, -v0.1), "A/B" pairs that name
one architecture ("DeepSeek-V3/R1"), and architecture twins (``ARCHITECTURE_TWINS``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from perfcast.errors import InputError
from perfcast.specs.hardware import SystemSpec
from perfcast.validate.vocabulary import VocabularyError

GB_PER_BYTE = 1e-9
MEMORY_MISMATCH_FRACTION = 0.05
"""A stated memory size further than this from the catalog GPU's is reported in notes."""


@dataclass(frozen=True)
class HardwareText:
    """What a ``gpu_type`` cell names."""

    system: str
    """System name: a catalog system named in the text, else the GPU's default system (a
    ``systems.yaml`` entry, or ``<gpu>-node`` assembled from the GPU's own row)."""
    system_spec: SystemSpec
    """That system (SI units), ``num_gpus`` not yet set."""
    gpu: str
    """Catalog GPU slug."""
    memory_GB: float | None = None
    """Memory size stated in the text (GB), if any."""
    power_W: float | None = None
    """Power limit stated in the text (W), if any."""
    notes: tuple[str, ...] = ()
    """What the text states that the catalog entry does not (memory, power limit)."""


_PARENS = re.compile(r"\(([^()]*)\)")
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*(?:GB|GiB|gb)\b")
_POWER = re.compile(r"(\d+(?:\.\d+)?)\s*W\b", re.IGNORECASE)
_VENDOR = re.compile(r"\b(?:nvidia|amd|instinct|intel|google|habana)\b", re.IGNORECASE)
_NOISE = re.compile(
    r"\b(?:hbm\d?e?|gpus?|x\d+|\d+x|power[- ]limited|power limit|tdp)\b", re.IGNORECASE)
_POWER_LIMITED = re.compile(r"power[- ]limit(?:ed)?", re.IGNORECASE)
"""A power cap named without a wattage ("B200 (power-limited; limit not stated)")."""
_FORM = re.compile(r"\b(?:sxm\d?|pcie|oam|nvl)\b", re.IGNORECASE)


def _words(text: str) -> str:
    return " ".join(text.split())


def _find(resolve: Callable[[str], str], name: str) -> str | None:
    if not name.strip():
        return None
    try:
        return resolve(name)
    except InputError:
        return None


def _gpu_candidates(base: str, memory_GB: float | None) -> list[str]:
    core = _words(_FORM.sub(" ", base))
    sized = [f"{base} {memory_GB:g}GB", f"{core} {memory_GB:g}GB"] if memory_GB else []
    return [*sized, base, core]


def read_gpu_type(text: str | None, column: str = "gpu_type") -> HardwareText | None:
    """Catalog system and GPU named by a ``gpu_type`` cell (module docstring); None if empty."""
    from perfcast.catalog.gpus import load_gpu, resolve_gpu_name
    from perfcast.catalog.resolve import suggest
    from perfcast.catalog.systems import load_system, resolve_system_name, system_for_gpu

    value = _words(text or "")
    if not value:
        return None
    remarks = [part.strip() for group in _PARENS.findall(value)
               for part in re.split(r"[,;]", group) if part.strip()]
    memory = _MEMORY.search(value)
    power = _POWER.search(value)
    if power is None and _POWER_LIMITED.search(value):
        # A capped board runs a lower sustained clock (catalog/power.py); without the cap the
        # forecast would borrow the rated clock, so the row lacks information, not a default.
        raise VocabularyError(column, value, "states a power limit without its value: the "
                              "sustained clock cannot be forecast")
    memory_GB = float(memory.group(1)) if memory else None
    base = _PARENS.sub(" ", value)
    base = _words(_NOISE.sub(" ", _MEMORY.sub(" ", _POWER.sub(" ", _VENDOR.sub(" ", base)))))
    devendored = _words(_VENDOR.sub(" ", value))
    gpu = None
    for candidate in (value, devendored, _words(_PARENS.sub(" ", devendored)),
                      *_gpu_candidates(base, memory_GB)):
        gpu = gpu or _find(resolve_gpu_name, candidate)
    system = None
    for candidate in (base, *(f"{base} {r}" for r in remarks), *remarks):
        slug = _find(resolve_system_name, candidate)
        if slug is not None and (gpu is None or load_system(slug).gpu.name == gpu):
            system = slug
            break
    if system is None and gpu is None:
        hints = suggest(base or value, _all_names())
        hint = f"; did you mean: {', '.join(hints)}?" if hints else ""
        raise VocabularyError(column, value, f"no catalog GPU or system{hint}")
    spec = load_system(system) if system is not None else system_for_gpu(gpu or "")
    gpu_slug = spec.gpu.name
    notes: list[str] = []
    catalog_GB = load_gpu(gpu_slug).hbm_capacity_bytes * GB_PER_BYTE
    if memory_GB and abs(memory_GB - catalog_GB) > MEMORY_MISMATCH_FRACTION * catalog_GB:
        notes.append(f"{column} states {memory_GB:g} GB; catalog {gpu_slug} has {catalog_GB:g} GB")
    power_W = float(power.group(1)) if power else None
    gpu_spec = load_gpu(gpu_slug)
    catalog_W = gpu_spec.power_limit_W or gpu_spec.tdp_W
    if power_W is not None and (catalog_W is None or abs(power_W - catalog_W) > 0.5):
        notes.append(f"{column} states a {power_W:g} W power limit; catalog {gpu_slug} peaks "
                     "are at its nominal power")
    return HardwareText(system=spec.name, system_spec=spec, gpu=gpu_slug, memory_GB=memory_GB,
                        power_W=power_W, notes=tuple(notes))


def _all_names() -> list[str]:
    from perfcast.catalog.gpus import gpu_names
    from perfcast.catalog.systems import system_names

    return [*gpu_names(), *system_names()]


# ----- model names -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ArchitectureTwin:
    """A released model whose architecture equals a catalog model's."""

    spelling: str
    catalog: str
    source: str


ARCHITECTURE_TWINS = (
    ArchitectureTwin(
        "Llama-3.3-70B", "llama-3.1-70b",
        "meta-llama/Llama-3.3-70B-Instruct model card and config.json: same LlamaForCausalLM "
        "shape as Llama-3.1-70B (80 layers, hidden 8192, 64/8 heads, ffn 28672, vocab 128256)"),
    ArchitectureTwin(
        "DeepSeek-R1", "deepseek-v3",
        "deepseek-ai/DeepSeek-R1 model card: trained from DeepSeek-V3-Base; config.json is the "
        "DeepseekV3ForCausalLM architecture of DeepSeek-V3"),
    ArchitectureTwin(
        "Qwen2-72B", "qwen2.5-72b",
        "Qwen/Qwen2-72B config.json: Qwen2ForCausalLM with the Qwen2.5-72B shape (80 layers, "
        "hidden 8192, 64/8 heads, ffn 29568, vocab 152064); Qwen2.5 changed data, not shape"),
    ArchitectureTwin(
        "Kimi-K2.5", "kimi-k2",
        "SemiAnalysis InferenceX Kimi K2.5/K2.6 blog (inference.csv rows 673-704 notes): 1.0T MoE, "
        "32B active, MLA, 61 layers, 384 routed experts top-8 -- the Kimi-K2 (DeepseekV3) shape"),
    ArchitectureTwin(
        "Kimi-K2.6", "kimi-k2",
        "SemiAnalysis InferenceX Kimi K2.5/K2.6 blog (inference.csv rows 673-704 notes): same "
        "shape as Kimi-K2.5 and Kimi-K2"),
)
"""Architecture twins (checked against the catalog by tests/test_vocabulary.py)."""

_SUFFIX = re.compile(r"[-_ ](?:instruct|base|chat|hf|it|fp8|bf16|\d{4}|v\d+(?:\.\d+)?)$",
                     re.IGNORECASE)
_PAREN_NOTE = re.compile(r"\([^()]*\)")


@dataclass(frozen=True)
class ModelNameText:
    """What a ``model`` cell names."""

    catalog: str
    """Catalog model slug."""
    notes: tuple[str, ...] = ()
    """Respellings applied (suffixes dropped, twin used)."""


def _name_forms(name: str) -> list[str]:
    """``name`` and its respellings without notes and release suffixes, longest first."""
    forms = [name]
    text = _words(_PAREN_NOTE.sub(" ", name))
    forms.append(text)
    while True:
        shorter = _SUFFIX.sub("", text).strip()
        if shorter == text or not shorter:
            break
        forms.append(shorter)
        text = shorter
    return forms


def model_stem(name: str) -> str:
    """Lower-case model name without Hugging Face organisation, notes and release suffixes
    ("mosaicml/MPT-7B-Instruct" -> "mpt-7b"), for family rules."""
    text = name.strip()
    if "/" in text and "/" not in _PAREN_NOTE.sub(" ", text).split("/", 1)[1]:
        text = text.split("/", 1)[1]
    return _name_forms(text)[-1].lower()


def _one_name(name: str, resolve: Callable[[str], str]) -> tuple[str, list[str]] | None:
    from perfcast.catalog.resolve import normalize_name

    twins = {normalize_name(t.spelling): t for t in ARCHITECTURE_TWINS}
    for form in _name_forms(name):
        slug = _find(resolve, form)
        if slug is not None:
            return slug, [] if form == name else [f"model {name!r} read as {form!r}"]
        twin = twins.get(normalize_name(form))
        if twin is not None:
            return twin.catalog, [f"model {name!r}: architecture of {twin.catalog} "
                                  f"({twin.source})"]
    return None


def _alternatives(name: str) -> list[str]:
    """"DeepSeek-V3/R1" -> ["DeepSeek-V3", "DeepSeek-R1"]; other names -> []."""
    text = _words(_PAREN_NOTE.sub(" ", name))
    if text.count("/") != 1:
        return []
    first, second = (part.strip() for part in text.split("/"))
    prefix = first.rsplit("-", 1)[0] + "-" if "-" in first and "-" not in second else ""
    return [first, prefix + second]


def read_model_name(text: str | None, column: str = "model") -> ModelNameText | None:
    """Catalog slug of a model name (module docstring); None if empty."""
    from perfcast.catalog.models import model_names, resolve_model_name
    from perfcast.catalog.resolve import suggest

    name = _words(text or "")
    if not name:
        return None
    found = _one_name(name, resolve_model_name)
    if found is None:
        parts = [_one_name(part, resolve_model_name) for part in _alternatives(name)]
        slugs = {p[0] for p in parts if p is not None}
        if parts and None not in parts and len(slugs) == 1:
            slug = slugs.pop()
            return ModelNameText(catalog=slug, notes=(f"model {name!r}: both names are {slug}",))
        hints = suggest(name, model_names())
        hint = f"; did you mean: {', '.join(hints)}?" if hints else ""
        reason = "names two architectures" if len(slugs) > 1 else f"not in the catalog{hint}"
        raise VocabularyError(column, name, reason)
    slug, notes = found
    return ModelNameText(catalog=slug, notes=tuple(notes))
