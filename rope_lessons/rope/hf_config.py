r"""From a Hugging Face model configuration to a :class:`~rope_lessons.rope.spec.Rope`.

transformers describes a model's RoPE in its configuration: ``rope_parameters``
(transformers 5: ``rope_type``, ``rope_theta`` and the type's own fields, or one
such mapping per layer type where layer types differ, as in Gemma) or, in
older configurations, ``rope_theta`` beside a ``rope_scaling`` mapping; the
head dimension (``head_dim``, else ``hidden_size // num_attention_heads``);
``partial_rotary_factor``; and ``max_position_embeddings``. :func:`hf_rope`
(also :meth:`Rope.from_hf <rope_lessons.rope.spec.Rope.from_hf>`) reads either form,
from a configuration object or a plain dict such as a model's ``config.json``,
and builds the spec whose frequencies and attention factor are those of
transformers' ``ROPE_INIT_FUNCTIONS`` for the same configuration, computed in
float64 by the course's own formulas (:func:`~rope_lessons.rope.ladder.frequencies`,
:func:`~rope_lessons.rope.scaled_specs.scaled_frequencies`).

Two different things are called "partial" (chapter 5):

* **HF partial rotary** (``partial_rotary_factor`` with every type but
  ``"proportional"``; GPT-NeoX, Phi, Qwen3-Next): only the leading
  ``int(head_dim * factor)`` features of each head rotate (:func:`hf_rotary_dim`),
  on a ladder recomputed for that smaller dimension, and the rest pass
  through, as transformers' ``apply_rotary_pos_emb`` does. The spec says so
  (``rotary_dim``, ``rotary_slice``; see :class:`~rope_lessons.rope.spec.Rope`) and
  applies to the whole head.
* **p-RoPE** (``rope_type="proportional"``, Gemma 4's full-attention layers):
  the whole head keeps RoPE's ladder for ``head_dim``, and all pairs but the
  fastest fraction get frequency 0. The spec covers the whole head.

Hugging Face models use the half (``rotate_half``) layout, which is therefore
the default here; a model whose code rotates interleaved pairs (DeepSeek-V4,
Meta's original Llama) needs ``layout="interleaved"``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import torch

from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.scaling import scaled_theta

HF_ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional")
"""The ``rope_type`` values of transformers' ``ROPE_INIT_FUNCTIONS`` (and "default")."""

_COMMON_FIELDS = frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor"})
_TYPE_FIELDS: dict[str, frozenset[str]] = {
    "default": frozenset(),
    "linear": frozenset({"factor"}),
    "dynamic": frozenset({"factor", "original_max_position_embeddings"}),
    "yarn": frozenset(
        {
            "factor",
            "attention_factor",
            "beta_fast",
            "beta_slow",
            "mscale",
            "mscale_all_dim",
            "original_max_position_embeddings",
            "truncate",
        }
    ),
    "longrope": frozenset(
        {
            "factor",
            "attention_factor",
            "long_factor",
            "short_factor",
            "original_max_position_embeddings",
        }
    ),
    "llama3": frozenset(
        {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}
    ),
    "proportional": frozenset({"factor"}),
}
_REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
    "longrope": ("long_factor", "short_factor"),
}
"""The fields transformers' init function of each type reads without a default."""
_NEEDS_SEQ_LEN = ("dynamic", "longrope")
"""The types whose frequencies depend on the length of the sequence being run."""
_ORIGINAL_LENGTH_TYPES = ("llama3", "yarn", "longrope")
"""The types whose ``original_max_position_embeddings`` transformers fills in."""


class _Rotating(NamedTuple):
    """The rotating features of a configuration's RoPE: their frequencies ``(rotary_dim/2,)``,
    the attention factor, and the ladder's base and ``p`` where the frequencies are RoPE's
    ladder by construction (None otherwise)."""

    theta: torch.Tensor
    attention_factor: float
    base: float | None = None
    p: float | None = None


class HfRope(NamedTuple):
    """What a Hugging Face configuration says of a layer's RoPE (:func:`hf_rope`), in the
    terms :class:`~rope_lessons.rope.spec.Rope` is built from.

    Attributes:
        head_dim: the head dimension (:func:`hf_head_dim`).
        theta: float64 ``(rotary_dim/2,)``, the rotating pairs' frequencies, pair 0 fastest;
            ``rotary_dim`` (:func:`hf_rotary_dim`) is twice its length.
        attention_factor: the factor transformers multiplies cos and sin by.
        base, p: the ladder ``theta`` is by construction (``"default"``, and
            ``"proportional"`` without a ``factor``), else None.
    """

    head_dim: int
    theta: torch.Tensor
    attention_factor: float
    base: float | None
    p: float | None


def load_config(config: Any) -> Any:
    """``config`` itself, or, for a path (``str`` or ``os.PathLike``) to a ``config.json``
    or to a model folder that holds one, the dict that file holds.

    Raises:
        FileNotFoundError: a path to no such file (a string that is not a path names it).
        ValueError: a file that does not hold a JSON object.
    """
    if not isinstance(config, (str, os.PathLike)):
        return config
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(config)!r} is not a configuration: no such file. Give a transformers "
            "configuration object, a dict, or the path of a config.json (or of its folder)"
        )
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not a JSON configuration: {error}") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} holds a JSON {type(loaded).__name__}, not a configuration")
    return loaded


def config_field(config: Any, name: str) -> Any:
    """A field of a configuration object or dict; None when it is absent (or, on a
    configuration whose layers differ, when it must be read from one layer's)."""
    if isinstance(config, Mapping):
        return config.get(name)
    try:
        return getattr(config, name, None)
    except Exception:  # transformers refuses per-layer fields on a heterogeneous config
        return None


def _for_layer_type(config: Any, layer_type: str | None) -> Any:
    """The configuration that holds ``layer_type``'s fields: ``per_layer_config[layer_type]``
    of a configuration object (Gemma 4), or a dict with the overrides that a
    ``config.json`` keeps under the index of the first layer of that type (``5``, ``"5"``
    or, as transformers' ``to_dict()`` writes it, ``"05"``)."""
    per_layer = config_field(config, "per_layer_config")
    if layer_type is None or per_layer is None:
        return config
    if not isinstance(per_layer, Mapping):
        try:
            return per_layer[layer_type]
        except (KeyError, IndexError, TypeError, ValueError):
            return config
    layer_types = list(config_field(config, "layer_types") or [])
    if not isinstance(config, Mapping) or layer_type not in layer_types:
        return config
    index = layer_types.index(layer_type)
    # keyed by the layer's index: 5, "5", or "05" as transformers' to_dict() writes it
    by_index = {int(key): value for key, value in per_layer.items() if str(key).isdigit()}
    return {**config, **_as_dict(by_index.get(index, {}), "per_layer_config entry")}


def _as_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping, got {type(value).__name__}")
    return dict(value)


def _keyed_by_layer_type(parameters: Mapping[str, Any]) -> bool:
    """Whether ``rope_parameters`` holds one mapping per layer type (Gemma 3 and 4)."""
    return bool(parameters) and all(isinstance(v, Mapping) for v in parameters.values())


def hf_rope_layer_types(config: Any) -> tuple[str, ...]:
    """The layer types that ``config``'s ``rope_parameters`` are keyed by, sorted;
    empty when one set of parameters serves every layer."""
    parameters = config_field(load_config(config), "rope_parameters")
    if isinstance(parameters, Mapping) and _keyed_by_layer_type(parameters):
        return tuple(sorted(parameters))
    return ()


def hf_rope_parameters(config: Any, layer_type: str | None = None) -> dict[str, Any]:
    """The RoPE parameters of ``config`` in transformers 5's ``rope_parameters`` form.

    Reads ``rope_parameters`` (for ``layer_type`` when it holds one mapping per
    layer type) or the older ``rope_theta`` + ``rope_scaling`` (whose
    ``type`` is read as ``rope_type``); a top-level ``partial_rotary_factor``
    is added where the parameters do not give one. For ``"llama3"``,
    ``"yarn"`` and ``"longrope"`` read from a dict, a top-level
    ``original_max_position_embeddings`` (Phi-3's ``config.json``) is the
    trained length where the parameters give none, as transformers reads it;
    a configuration object has it in its parameters already. ``config`` may be
    a path (see :func:`load_config`).

    Raises:
        ValueError: a per-layer-type configuration without ``layer_type`` (or
            with one it does not have), a ``layer_type`` for a configuration
            that has only one set of parameters, no ``rope_theta``, or a dict
            that says two different things (``rope_parameters`` beside a
            different ``rope_scaling``; two different trained lengths).
    """
    config = load_config(config)
    parameters = config_field(config, "rope_parameters")
    if isinstance(config, Mapping) and config.get("rope_scaling") and parameters:
        _refuse_two_descriptions(config)
    if parameters is None:
        parameters = _legacy_parameters(config)
    parameters = _as_dict(parameters, "rope_parameters")
    keyed = _keyed_by_layer_type(parameters)
    if keyed:
        if layer_type is None:
            raise ValueError(
                f"this configuration has RoPE parameters per layer type {sorted(parameters)}: "
                "give layer_type="
            )
        if layer_type not in parameters:
            raise ValueError(
                f"layer_type {layer_type!r} is not one of this configuration's {sorted(parameters)}"
            )
        parameters = _as_dict(parameters[layer_type], f"rope_parameters[{layer_type!r}]")
    elif layer_type is not None:
        raise ValueError(
            f"layer_type={layer_type!r} given, but this configuration has one set of RoPE "
            "parameters for every layer"
        )
    parameters = _standard_names(parameters)
    if "partial_rotary_factor" not in parameters and config_field(config, "partial_rotary_factor"):
        parameters["partial_rotary_factor"] = config_field(config, "partial_rotary_factor")
    if isinstance(config, Mapping) and not keyed:
        _read_top_level_original_length(config, parameters)
    if parameters.get("rope_theta") is None:
        raise ValueError("the configuration gives no rope_theta (the base)")
    return parameters


def _legacy_parameters(config: Any) -> dict[str, Any]:
    """The older form: ``rope_scaling`` (or nothing) with the top-level ``rope_theta``."""
    scaling = config_field(config, "rope_scaling") if isinstance(config, Mapping) else None
    parameters = {**_as_dict(scaling, "rope_scaling")} if scaling is not None else {}
    if config_field(config, "rope_theta") is not None:
        parameters.setdefault("rope_theta", config_field(config, "rope_theta"))
    return parameters


def _standard_names(parameters: dict[str, Any]) -> dict[str, Any]:
    """``type`` read as ``rope_type``, and ``"default"`` where neither is given."""
    parameters = dict(parameters)
    if "type" in parameters and "rope_type" not in parameters:
        parameters["rope_type"] = parameters["type"]
    parameters.pop("type", None)
    parameters.setdefault("rope_type", "default")
    return parameters


def _refuse_two_descriptions(config: Mapping[str, Any]) -> None:
    """A dict with both ``rope_parameters`` and ``rope_scaling``: accepted where they say the
    same, refused where they differ (config classes do not agree on which one wins)."""
    parameters = _as_dict(config["rope_parameters"], "rope_parameters")
    if _keyed_by_layer_type(parameters):
        same = False
    else:
        read = _standard_names(parameters)
        if config.get("rope_theta") is not None:
            read.setdefault("rope_theta", config["rope_theta"])
        same = read == _standard_names(_legacy_parameters(config))
    if not same:
        raise ValueError(
            "this configuration gives both rope_parameters and rope_scaling, and they differ: "
            f"rope_parameters = {dict(parameters)}, rope_scaling = {dict(config['rope_scaling'])}. "
            "transformers' configuration classes read rope_scaling (with the top-level "
            "rope_theta) and drop rope_parameters; delete the one the model was not trained with"
        )


def _read_top_level_original_length(config: Mapping[str, Any], parameters: dict[str, Any]) -> None:
    """Phi-3's ``config.json`` keeps ``original_max_position_embeddings`` beside
    ``rope_scaling``, not in it; transformers reads it there (Phi3Config gives it priority,
    and the other classes take it from ``rope_scaling``'s older form too)."""
    top = config.get("original_max_position_embeddings")
    if top is None or parameters["rope_type"] not in _ORIGINAL_LENGTH_TYPES:
        return
    inner = parameters.get("original_max_position_embeddings")
    if inner is not None and int(inner) != int(top):
        raise ValueError(
            f"two trained lengths: original_max_position_embeddings = {top} at the top level "
            f"and {inner} in the RoPE parameters. transformers' Phi3Config reads the top-level "
            "one, the other classes the parameters' one: keep one of them"
        )
    parameters["original_max_position_embeddings"] = int(top)


def hf_head_dim(config: Any, layer_type: str | None = None) -> int:
    """The head dimension transformers uses: ``head_dim`` (of the layer type's own
    configuration where layers differ), else ``hidden_size // num_attention_heads``."""
    source = _for_layer_type(load_config(config), layer_type)
    head_dim = config_field(source, "head_dim")
    if head_dim is None:
        hidden, heads = (
            config_field(source, "hidden_size"),
            config_field(source, "num_attention_heads"),
        )
        if hidden is None or heads is None:
            raise ValueError(
                "the configuration gives neither head_dim nor hidden_size and num_attention_heads"
            )
        head_dim = int(hidden) // int(heads)
    return int(head_dim)


def hf_rotary_dim(config: Any, layer_type: str | None = None) -> int:
    """How many leading features of each head rotate: for HF partial rotary the
    ``int(head_dim * partial_rotary_factor)`` that transformers computes, rounded up to
    even (an odd count still gets one frequency per pair started, see
    :func:`hf_rope`); the whole head otherwise (p-RoPE's ``"proportional"`` included)."""
    config = load_config(config)
    return _rotating_features(
        hf_rope_parameters(config, layer_type), hf_head_dim(config, layer_type)
    )


def _exponent_dim(parameters: dict[str, Any], head_dim: int) -> int:
    """The ``dim`` of transformers' ladder ``base ** (-arange(0, dim, 2) / dim)``:
    ``int(head_dim * partial_rotary_factor)``, or the head for ``"proportional"``."""
    if parameters["rope_type"] == "proportional":
        return head_dim
    factor = parameters.get("partial_rotary_factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ValueError(f"partial_rotary_factor must be a number in (0, 1], got {factor!r}")
    dim = int(head_dim * float(factor))
    if dim < 1:
        raise ValueError(
            f"partial_rotary_factor {factor} of head_dim {head_dim} leaves no feature to rotate"
        )
    return dim


def _rotating_features(parameters: dict[str, Any], head_dim: int) -> int:
    """:func:`hf_rotary_dim` from the parameters and head dimension already read: the
    ``ceil(dim / 2)`` pairs of transformers' ladder, two features each."""
    return 2 * math.ceil(_exponent_dim(parameters, head_dim) / 2)


def hf_rope(
    config: Any,
    layer_type: str | None = None,
    *,
    seq_len: int | None = None,
) -> HfRope:
    """What a Hugging Face configuration says of its RoPE (see the module):
    :meth:`Rope.from_hf <rope_lessons.rope.spec.Rope.from_hf>` builds the spec from it.

    Args:
        config: a transformers configuration object, a plain dict (such as a
            model's ``config.json``), or the path of a ``config.json`` or of its folder.
        layer_type: for configurations with RoPE parameters per layer type
            (``"full_attention"``, ``"sliding_attention"``, ...).
        seq_len: the number of positions the model runs, required for
            ``"dynamic"`` and ``"longrope"`` and refused for the other types.
            transformers computes it in every forward pass as
            ``max(position_ids) + 1`` (the largest position plus one, not the
            largest position): ``"dynamic"`` raises the base once it exceeds
            ``max_position_embeddings`` and keeps RoPE's ladder up to it;
            ``"longrope"`` takes the long factors once it exceeds
            ``original_max_position_embeddings`` and the short ones up to it.

    Returns:
        The description of a spec of dimension :func:`hf_head_dim` whose ``theta`` and
        ``attention_factor`` equal what ``ROPE_INIT_FUNCTIONS[rope_type](config,
        seq_len=seq_len)`` returns, to transformers' float32 rounding, and whose
        ``rotary_dim`` is :func:`hf_rotary_dim`. Its :meth:`~rope_lessons.rope.spec.Rope.apply`
        and :meth:`~rope_lessons.rope.spec.Rope.cos_sin` scale by the attention factor, as
        transformers' ``q_embed`` does.

        A ``partial_rotary_factor`` that makes ``int(head_dim * factor)`` odd
        (0.3 of 64 gives 19) is read as transformers reads it: ``ceil(19 / 2) = 10``
        pairs, the leading 20 features, at ``base ** (-2k / 19)``; for the
        ``"default"`` type only (the extension methods' formulas assume an even
        count).

    Raises:
        ValueError: an unknown ``rope_type``, a field the type does not read
            (named; multimodal sections such as ``mrope_section`` among them),
            or a missing one; a missing or non-positive ``seq_len`` where it is
            required.
        FileNotFoundError: a path to no configuration.
    """
    config = load_config(config)
    parameters = hf_rope_parameters(config, layer_type)
    head_dim = hf_head_dim(config, layer_type)
    max_positions = config_field(_for_layer_type(config, layer_type), "max_position_embeddings")
    rotating = _rotating_spec(parameters, head_dim, max_positions, seq_len)
    return HfRope(head_dim, *rotating)


def _rotating_spec(
    parameters: dict[str, Any],
    head_dim: int,
    max_positions: Any,
    seq_len: int | None,
) -> _Rotating:
    """The rotating features alone (:func:`hf_rotary_dim` of them), from the
    configuration's parameters, head dimension and ``max_position_embeddings``."""
    rope_type = str(parameters["rope_type"])
    if rope_type not in HF_ROPE_TYPES:
        raise ValueError(f"rope_type {rope_type!r} is not one of {HF_ROPE_TYPES}")
    unknown = sorted(set(parameters) - _COMMON_FIELDS - _TYPE_FIELDS[rope_type])
    if unknown:
        raise ValueError(f"rope_type {rope_type!r} does not read {unknown}: not supported here")
    missing = [name for name in _REQUIRED_FIELDS.get(rope_type, ()) if parameters.get(name) is None]
    if missing:
        raise ValueError(
            f"rope_type {rope_type!r} needs {missing} in its parameters (transformers reads "
            "them without a default)"
        )
    _check_seq_len(rope_type, seq_len, parameters, max_positions)
    base = float(parameters["rope_theta"])
    exponent_dim = _exponent_dim(parameters, head_dim)
    dim = _rotating_features(parameters, head_dim)

    def original_length() -> int:
        value = parameters.get("original_max_position_embeddings") or max_positions
        if value is None:
            raise ValueError(f"{rope_type!r} needs original_max_position_embeddings")
        return int(value)

    if exponent_dim % 2:
        if rope_type != "default":
            raise ValueError(
                f"partial_rotary_factor gives int(head_dim * factor) = {exponent_dim}, an odd "
                f"count: transformers then turns {dim} features with exponents over "
                f"{exponent_dim}, which is supported here for 'default' only, not {rope_type!r}"
            )
        k = torch.arange(dim // 2, dtype=torch.float64)
        return _Rotating(base ** (-2.0 * k / exponent_dim), 1.0)
    if rope_type == "default":
        return _Rotating(frequencies(dim, base), 1.0, base, 1.0)
    if rope_type == "proportional":
        return _proportional(parameters, head_dim, base)
    if rope_type == "longrope":
        return _longrope(parameters, dim, base, original_length(), max_positions, seq_len)
    if rope_type == "linear":
        return _Rotating(
            *scaled_theta(
                dim,
                "linear",
                factor=float(parameters["factor"]),
                original_length=1,  # position interpolation does not read the trained length
                base=base,
            )
        )
    if rope_type == "llama3":
        return _Rotating(
            *scaled_theta(
                dim,
                "llama3",
                factor=float(parameters["factor"]),
                original_length=original_length(),
                base=base,
                low_freq_factor=float(parameters["low_freq_factor"]),
                high_freq_factor=float(parameters["high_freq_factor"]),
            )
        )
    if rope_type == "dynamic":
        assert seq_len is not None  # _check_seq_len
        return _Rotating(
            *scaled_theta(
                dim,
                "dynamic",
                factor=float(parameters["factor"]),
                original_length=int(max_positions),
                base=base,
                length=max(seq_len, int(max_positions)),
            )
        )
    return _yarn(parameters, dim, base, original_length(), max_positions)


def _check_seq_len(
    rope_type: str, seq_len: object, parameters: dict[str, Any], max_positions: Any
) -> None:
    """``seq_len`` must be given, a positive int, for the types that read it, and not
    otherwise (see :func:`hf_rope`)."""
    if rope_type not in _NEEDS_SEQ_LEN:
        if seq_len is not None:
            raise ValueError(
                f"seq_len is read only by {' and '.join(map(repr, _NEEDS_SEQ_LEN))}, "
                f"not {rope_type!r}"
            )
        return
    if rope_type == "dynamic":
        if max_positions is None:
            raise ValueError("'dynamic' needs max_position_embeddings")
        threshold = f"its base grows once seq_len exceeds max_position_embeddings = {max_positions}"
    else:
        length = parameters.get("original_max_position_embeddings") or max_positions
        threshold = (
            "it takes the long factors once seq_len exceeds original_max_position_embeddings"
            f" = {length}, the short ones up to it"
        )
    if seq_len is None:
        raise ValueError(
            f"{rope_type!r} RoPE depends on the length of the sequence it runs: give seq_len, "
            "the number of positions (transformers uses max(position_ids) + 1 in each forward "
            f"pass; {threshold})"
        )
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(
            f"seq_len must be a positive int (the number of positions, max(position_ids) + 1), "
            f"got {seq_len!r}"
        )


def _proportional(parameters: dict[str, Any], head_dim: int, base: float) -> _Rotating:
    """p-RoPE (Gemma 4's ``"proportional"``): the full-head ladder with all but the fastest
    ``partial_rotary_factor`` of its pairs stopped, the rest divided by ``factor``. Built as
    :class:`~rope_lessons.rope.spec.Rope`'s own p-RoPE where ``factor`` is 1, so that the spec
    converts back (:meth:`~rope_lessons.rope.spec.Rope.to_hf`) like one built by hand."""
    p = float(parameters.get("partial_rotary_factor", 1.0))
    factor = float(parameters.get("factor", 1.0))
    if factor == 1.0:
        return _Rotating(frequencies(head_dim, base, p=p), 1.0, base, p)
    return _Rotating(frequencies(head_dim, base, p=p) / factor, 1.0)


def _extension_factor(
    parameters: dict[str, Any], max_positions: Any, original_length: int
) -> float:
    """``factor``, or, as transformers reads a configuration without one (Phi-3,
    DeepSeek-V3), ``max_position_embeddings / original_max_position_embeddings``."""
    factor = parameters.get("factor")
    if factor is not None:
        return float(factor)
    if max_positions is None:
        raise ValueError("no factor, and no max_position_embeddings to derive it from")
    return int(max_positions) / original_length


def _yarn(
    parameters: dict[str, Any],
    dim: int,
    base: float,
    original_length: int,
    max_positions: Any,
) -> _Rotating:
    """YaRN as transformers reads its parameters."""
    factor = _extension_factor(parameters, max_positions, original_length)
    attention_factor = parameters.get("attention_factor")
    mscale, mscale_all_dim = parameters.get("mscale"), parameters.get("mscale_all_dim")
    if attention_factor is None and not (mscale and mscale_all_dim):
        mscale = mscale_all_dim = None  # transformers uses 0.1 ln s + 1 then
    return _Rotating(
        *scaled_theta(
            dim,
            "yarn",
            factor=float(factor),
            original_length=original_length,
            base=base,
            beta_fast=float(parameters.get("beta_fast") or 32.0),
            beta_slow=float(parameters.get("beta_slow") or 1.0),
            truncate=bool(parameters.get("truncate", True)),
            mscale=None if attention_factor is not None else mscale,
            mscale_all_dim=None if attention_factor is not None else mscale_all_dim,
            attention_factor=None if attention_factor is None else float(attention_factor),
        )
    )


def _longrope(
    parameters: dict[str, Any],
    dim: int,
    base: float,
    original_length: int,
    max_positions: Any,
    seq_len: int | None,
) -> _Rotating:
    """LongRoPE (Phi-3): RoPE's ladder divided pair by pair by the short or long factors."""
    factor = _extension_factor(parameters, max_positions, original_length)
    attention_factor = parameters.get("attention_factor")
    if attention_factor is None:
        attention_factor = (
            1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original_length))
        )
    long = seq_len is not None and seq_len > original_length
    rescale = torch.tensor(
        parameters["long_factor" if long else "short_factor"], dtype=torch.float64
    )
    if rescale.shape != (dim // 2,):
        raise ValueError(
            f"{'long' if long else 'short'}_factor must hold {dim // 2} values (one per pair), "
            f"got shape {tuple(rescale.shape)}"
        )
    return _Rotating(frequencies(dim, base) / rescale, float(attention_factor))
