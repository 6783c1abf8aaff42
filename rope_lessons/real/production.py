r"""RoPE in the models of 2025-2026, layer by layer, from their transformers configurations.

A production model's configuration says, for each layer, whether it rotates
at all, with which frequencies, and which keys each query may see. These
functions read that from a ``transformers`` configuration object (or its
``config.json`` dict) in the course's terms, so that the course's
:func:`~rope_lessons.toy.rotary_attention.attention` reproduces the model's own
attention layer (the course's tests check it, family by family, against the
layers of the pinned transformers):

- :func:`uses_rope`: NoPE layers, flagged per layer in ``no_rope_layers``
  (SmolLM3 drops RoPE from every fourth layer, Llama 4 from every fourth as
  well: iRoPE);
- :func:`layer_local`: the keys a layer's queries see, from ``layer_types``
  (``"sliding_attention"``: a window, as in gpt-oss's every other layer;
  ``"chunked_attention"``: Llama 4's chunks);
- :func:`layer_rope`: the layer's :class:`~rope_lessons.rope.spec.Rope`, or None on
  a NoPE layer, in the layout the family's code rotates (:data:`LAYOUTS`);
- :func:`nope_temperature`: the factor by which Llama 4 scales the queries of
  its NoPE layers, growing with the logarithm of the position;
- Gemma 4's layers take their RoPE parameters by layer type: base 10^4 in
  the sliding layers, and in the full ones transformers' ``"proportional"``
  type with ``partial_rotary_factor`` 0.25, which is p-RoPE (the fastest
  quarter of the full head's pairs turn, the rest stand still), not HF
  partial rotary; its full layers may also read their values from the key
  projection (``attention_k_eq_v``), normed but not rotated;
- DeepSeek-V4's layers are VO-RoPE (:func:`layer_placement` ``"qkvo"``):
  one projection serves as key and value, the trailing slice of each head
  turns in the interleaved layout, and the output turns back at the query's
  position; its learned sinks are gpt-oss's. Its compressed layers add one
  entry per :func:`compress_rate` positions of the past, turned at the first
  position of its block (:func:`compressed_positions`) with their own ladder;
  :func:`compressed_features` counts what they keep;
- DeepSeek-V3's MLA turns a part of each head that its configuration sizes
  apart (:data:`DECOUPLED`) and multiplies its softmax scale by
  :func:`mla_softmax_scale`;
- Qwen3.5 turns the leading quarter of each head (HF partial rotary) with
  multimodal RoPE: :func:`mrope_sections` gives its pairs per axis, assigned
  in turn to time, height and width (:mod:`rope_lessons.rope.mrope`); text tokens
  sit at the same position on every axis, so :func:`layer_rope` is its text
  path;
- gpt-oss's learned attention sinks are the ``sinks`` of
  :func:`~rope_lessons.toy.rotary_attention.attention`, its YaRN (factor 32) the spec
  that :func:`layer_rope` reads;
- :func:`design_row`: one model's design in those terms, a row of a table
  (with the norms and sinks that the family's code fixes);
- :func:`qk_rms_norm`: the weightless RMS norm Llama 4 applies to rotated
  queries and keys; a rotation keeps a vector's norm, so it may be applied
  before RoPE instead, which is how :func:`~rope_lessons.toy.rotary_attention.attention`
  (which rotates inside) takes it.

Shapes: ``B`` batch, ``H`` heads, ``T`` positions, ``D`` head dimension.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from rope_lessons._checks import Layout, RotarySlice
from rope_lessons.rope.hf_config import (
    _for_layer_type,
    config_field,
    hf_head_dim,
    hf_rope_layer_types,
    hf_rope_parameters,
)
from rope_lessons.rope.mrope import Assignment
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import Local, Placement

# How each family's modeling code in transformers lays out a head's pairs:
# rotate_half (pairs k, k + D/2) or view_as_complex on neighbours (pairs 2k, 2k+1).
LAYOUTS: dict[str, Layout] = {
    "llama": "half",
    "smollm3": "half",
    "llama4_text": "interleaved",
    "gpt_oss": "half",
    "gemma4_text": "half",
    "deepseek_v4": "interleaved",
    "qwen2_vl_text": "half",
    "qwen3_vl_text": "half",
    "qwen3_5_text": "half",
    "phi3": "half",
    "glm4": "interleaved",  # neighbouring pairs within the leading rotary slice
    "deepseek_v3": "interleaved",  # rope_interleave: the checkpoint's pairs are neighbours
}
# Families whose RoPE turns its own features beside the attention head's unrotated ones
# (MLA's decoupled RoPE: the configuration's head_dim is the rotating part alone).
DECOUPLED: frozenset[str] = frozenset({"deepseek_v3"})
# How multimodal families assign a head's pairs to the axes (time, height, width).
MROPE_ASSIGNMENTS: dict[str, Assignment] = {
    "qwen2_vl_text": "sections",
    "qwen3_vl_text": "interleaved",
    "qwen3_5_text": "interleaved",
}
# Where the rotating slice of a partially rotary head sits, where it is not the leading one:
# DeepSeek lays each head out as [nope | rope].
ROTARY_SLICES: dict[str, RotarySlice] = {"deepseek_v4": "trailing"}
# Layer types that are recurrent (linear attention), not softmax attention over positions.
LINEAR_LAYER_TYPES: frozenset[str] = frozenset({"linear_attention"})
# DeepSeek-V4's layers whose window is joined by compressed entries of the past: one per
# compress_rates[type] positions; CSA reads the indexer's top index_topk of them, HCA all.
COMPRESSED_LAYER_TYPES: frozenset[str] = frozenset(
    {"compressed_sparse_attention", "heavily_compressed_attention"}
)


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' warnings and log messages while a configuration is built
    (a tiny test configuration's token ids, or published values its validation
    doubts, such as Llama 4 Scout's equal Llama 3 factors, which
    :func:`~rope_lessons.rope.scaling.llama3_weight` reads as the step they are)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(level)


def _model_type(config: Any) -> str:
    model_type = config_field(config, "model_type")
    if model_type not in LAYOUTS:
        raise ValueError(
            f"no layout is recorded for model_type {model_type!r}; known: {sorted(LAYOUTS)}"
        )
    return str(model_type)


def _layer_count(config: Any) -> int:
    count = config_field(config, "num_hidden_layers")
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"the configuration needs num_hidden_layers, got {count!r}")
    return count


def _check_layer(config: Any, layer_idx: int) -> None:
    count = _layer_count(config)
    if isinstance(layer_idx, bool) or not isinstance(layer_idx, int):
        raise TypeError(f"layer_idx must be an int, got {layer_idx!r}")
    if not 0 <= layer_idx < count:
        raise ValueError(f"layer_idx {layer_idx} is not a layer of this model (0 .. {count - 1})")


def uses_rope(config: Any, layer_idx: int) -> bool:
    """Whether layer ``layer_idx`` rotates its queries and keys.

    ``no_rope_layers[i]`` is 1 for a layer with RoPE and 0 for a NoPE layer
    (SmolLM3, Llama 4); a configuration without the field rotates in every
    attention layer. A linear-attention layer (:data:`LINEAR_LAYER_TYPES`,
    Qwen3.5's gated delta rule) has no RoPE: it orders tokens by its recurrence.
    """
    if layer_type(config, layer_idx) in LINEAR_LAYER_TYPES:
        return False
    flags = config_field(config, "no_rope_layers")
    if flags is None:
        return True
    if len(flags) != _layer_count(config):
        raise ValueError(
            f"no_rope_layers has {len(flags)} entries for {_layer_count(config)} layers"
        )
    return bool(flags[layer_idx])


def layer_type(config: Any, layer_idx: int) -> str:
    """``layer_types[layer_idx]`` (``"full_attention"`` where the field is absent)."""
    _check_layer(config, layer_idx)
    types = config_field(config, "layer_types")
    return "full_attention" if types is None else str(types[layer_idx])


def layer_local(config: Any, layer_idx: int) -> Local | None:
    """The keys a query of layer ``layer_idx`` sees beyond the causal mask.

    ``"sliding_attention"``: the last ``sliding_window`` positions, the query's
    own included (Hugging Face's ``kv_idx > q_idx - sliding_window``), unless
    ``use_sliding_window`` is False (SmolLM3's switch); ``"chunked_attention"``:
    the query's chunk of ``attention_chunk_size`` positions (Llama 4). None:
    every earlier key.
    """
    kind = layer_type(config, layer_idx)
    if kind in COMPRESSED_LAYER_TYPES:  # a window plus compressed entries of the past
        raise ValueError(f"DeepSeek-V4's {kind!r} layers add compressed entries: not read here")
    if kind == "sliding_attention":
        if config_field(config, "use_sliding_window") is False:
            return None
        return Local(int(config_field(config, "sliding_window")), "window")
    if kind == "chunked_attention":
        return Local(int(config_field(config, "attention_chunk_size")), "chunk")
    if kind == "full_attention" or kind in LINEAR_LAYER_TYPES:
        return None
    raise ValueError(f"layer type {kind!r} of layer {layer_idx} is not one this module reads")


def layer_rope(config: Any, layer_idx: int) -> Rope | None:
    """Layer ``layer_idx``'s RoPE spec (:meth:`~rope_lessons.rope.spec.Rope.from_hf` in the
    family's layout, :data:`LAYOUTS`, with the parameters of the layer's type where
    they differ by type, as in Gemma 4), or None for a NoPE or linear-attention layer."""
    if not uses_rope(config, layer_idx):
        return None
    model_type = _model_type(config)
    source, kind = _rope_source(config, layer_idx)
    return Rope.from_hf(
        source,
        kind,
        layout=LAYOUTS[model_type],
        rotary_slice=ROTARY_SLICES.get(model_type, "leading"),
    )


def _rope_source(config: Any, layer_idx: int) -> tuple[Any, str | None]:
    """The configuration to read layer ``layer_idx``'s RoPE from, and the key of its
    parameters (None where one set serves every layer)."""
    model_type = _model_type(config)
    kind: str | None = layer_type(config, layer_idx)
    if model_type == "deepseek_v4":  # its RoPE parameters are keyed "main" and "compress"
        kind = "main" if kind == "sliding_attention" else "compress"
    elif not hf_rope_layer_types(config):
        kind = None
    if model_type in MROPE_ASSIGNMENTS:  # the text path: one ladder, every axis at m
        config = _without_mrope(config)
    return config, kind


def _without_mrope(config: Any) -> dict[str, Any]:
    """``config`` as a dict whose RoPE parameters leave out the multimodal sections."""
    fields = config if isinstance(config, dict) else config.to_dict()
    parameters = dict(config_field(fields, "rope_parameters") or {})
    for name in ("mrope_section", "mrope_interleaved"):
        parameters.pop(name, None)
    return {**fields, "rope_parameters": parameters}


def mrope_sections(config: Any) -> tuple[list[int], Assignment] | None:
    """A multimodal family's pairs per axis (time, height, width) and how they are
    assigned (:func:`rope_lessons.rope.mrope.pair_axes`), or None for a text-only family.

    transformers' Qwen3.5 code falls back to ``[11, 11, 10]`` when the
    configuration gives no ``mrope_section``; so does this function.
    """
    model_type = _model_type(config)
    if model_type not in MROPE_ASSIGNMENTS:
        return None
    parameters = config_field(config, "rope_parameters") or {}
    sections = [int(s) for s in parameters.get("mrope_section", [11, 11, 10])]
    return sections, MROPE_ASSIGNMENTS[model_type]


def layer_placement(config: Any, layer_idx: int) -> Placement:
    """Where layer ``layer_idx`` rotates, in the course's placements: ``"nope"`` on a
    NoPE layer; ``"qkvo"`` in DeepSeek-V4, whose one projection is key and value
    (K = V), so the value turns with the key and the output turns back at the
    query's position (VO-RoPE); ``"qk"`` otherwise."""
    kind = layer_type(config, layer_idx)
    if kind in LINEAR_LAYER_TYPES:
        raise ValueError(f"layer {layer_idx} is {kind}, a recurrence: it has no placement")
    if not uses_rope(config, layer_idx):
        return "nope"
    return "qkvo" if _model_type(config) == "deepseek_v4" else "qk"


def compress_rate(config: Any, layer_idx: int) -> int:
    """How many positions DeepSeek-V4 pools into one compressed entry in layer
    ``layer_idx`` (``compress_rates`` of its layer type: 4 in the CSA layers, 128 in
    the HCA layers of V4-Flash).

    Raises:
        ValueError: for a layer that is not one of :data:`COMPRESSED_LAYER_TYPES`.
    """
    kind = layer_type(config, layer_idx)
    if kind not in COMPRESSED_LAYER_TYPES:
        raise ValueError(f"layer {layer_idx} is {kind}: it keeps no compressed entries")
    return int(config_field(config, "compress_rates")[kind])


def compressed_positions(config: Any, layer_idx: int, length: int) -> torch.Tensor:
    """The positions at which DeepSeek-V4's compressed entries of layer ``layer_idx`` turn,
    for a sequence of ``length`` positions: entry ``w`` pools positions ``w r .. w r + r - 1``
    (``r``: :func:`compress_rate`) and turns at the first of them, ``w r``, with the
    compressed layers' ladder. Only complete blocks make an entry.

    Returns:
        int64 ``(length // r,)``.
    """
    rate = compress_rate(config, layer_idx)
    return torch.arange(length // rate) * rate


def compressed_features(config: Any, layer_idx: int) -> float:
    """Numbers per position of the whole past that a DeepSeek-V4 layer keeps in compressed
    entries, beside the full entries of its window: one ``head_dim`` entry per
    :func:`compress_rate` positions, and in the CSA layers one indexer key of
    ``index_head_dim`` per entry as well; 0 for a layer without compression."""
    kind = layer_type(config, layer_idx)
    if kind not in COMPRESSED_LAYER_TYPES:
        return 0.0
    width = int(config_field(config, "head_dim"))
    if kind == "compressed_sparse_attention":  # the indexer keeps its own compressed keys
        width += int(config_field(config, "index_head_dim"))
    return width / compress_rate(config, layer_idx)


def mla_softmax_scale(config: Any) -> float:
    r"""The factor by which DeepSeek-V3's MLA multiplies its softmax scale
    :math:`1/\sqrt{D}`: :math:`(0.1\,\text{mscale\_all\_dim} \ln s + 1)^2` for a YaRN
    factor :math:`s > 1` (transformers' ``yarn_apply_mscale``), 1 without an extension or
    without ``mscale_all_dim``.

    It scales every logit, the features that never turn and the rotating ones alike;
    YaRN's attention factor (:func:`~rope_lessons.rope.scaling.yarn_attention_factor`)
    scales only the rotated queries and keys, and with ``mscale`` equal to
    ``mscale_all_dim`` it is 1. DeepSeek-V3's published 40 and 1.0 give 1.874.
    """
    parameters = hf_rope_parameters(config)
    mscale_all_dim = parameters.get("mscale_all_dim") or 0.0
    if parameters.get("rope_type", "default") == "default" or not mscale_all_dim:
        return 1.0
    factor = float(parameters["factor"])
    mscale = 1.0 if factor <= 1.0 else 0.1 * float(mscale_all_dim) * math.log(factor) + 1.0
    return mscale * mscale


def nope_temperature(
    positions: torch.Tensor, *, floor_scale: float, attn_scale: float
) -> torch.Tensor:
    r"""Llama 4's query scale in its NoPE layers: :math:`1 + s\,\ln(1 + \lfloor (m+1)/f \rfloor)`.

    Without RoPE nothing tells near keys from far ones, and a softmax over
    more keys grows flatter; scaling the logits up with the logarithm of the
    position keeps them sharp. transformers' Llama 4 code cites K. M.
    Nakanishi's Scalable-Softmax (arXiv:2501.19399), which multiplies the
    query by :math:`s \log n` for ``n`` keys. The scale is 1 for the first
    ``f - 1`` positions.

    Args:
        positions: integer positions ``m``, any shape.
        floor_scale: ``f``, the config's ``floor_scale`` (8192 in Llama 4).
        attn_scale: ``s``, the config's ``attn_scale`` (0.1 in Llama 4).

    Returns:
        float32 scales of the shape of ``positions``, computed as transformers does.
    """
    if positions.is_floating_point() or positions.is_complex():
        raise TypeError(f"positions must be integers, got {positions.dtype}")
    if not floor_scale > 0:
        raise ValueError(f"floor_scale must be positive, got {floor_scale}")
    steps = torch.floor((positions.float() + 1.0) / floor_scale)
    return torch.log1p(steps) * attn_scale + 1.0


def qk_rms_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    r"""``x`` divided by its root mean square over the last axis, without a weight.

    :math:`x / \sqrt{\overline{x^2} + \epsilon}`, computed in float32 and
    returned in ``x``'s dtype, as Llama 4's ``Llama4TextL2Norm``. A rotation
    keeps :math:`\overline{x^2}`, so norming before RoPE equals norming after
    it up to rounding.

    Args:
        x: ``(..., D)``.
        eps: added to the mean square (the config's ``rms_norm_eps``).
    """
    computed = x.float()
    return (computed * torch.rsqrt(computed.pow(2).mean(-1, keepdim=True) + eps)).type_as(x)


# Facts of each family's attention code that its configuration does not hold, as read in
# the pinned transformers (models/<family>/modeling_<family>.py): the norms on queries and
# keys, and whether each head has a learned sink.
QK_NORMS: dict[str, str] = {
    "llama": "none",
    "smollm3": "none",
    "llama4_text": "weightless RMS after RoPE, in RoPE layers (use_qk_norm)",
    "gpt_oss": "none",
    "gemma4_text": "RMS on q and k before RoPE; weightless RMS on v",
    "deepseek_v4": "weightless RMS on q; RMS on the shared key-value",
    "qwen2_vl_text": "none",
    "qwen3_vl_text": "RMS on q and k before RoPE",
    "qwen3_5_text": "RMS on q and k before RoPE",
    "phi3": "none",
    "glm4": "none",
    "deepseek_v3": "RMS on the compressed q and kv (MLA), not per head",
}
SINKS: frozenset[str] = frozenset({"gpt_oss", "deepseek_v4"})


def _rotary_part(spec: Rope) -> str:
    if spec.partial:
        return f"{spec.rotary_slice} {spec.rotary_dim} of {spec.dim} features (HF partial rotary)"
    turning = int((spec.theta > 0).sum())
    if turning < spec.dim // 2:
        return f"p-RoPE, p = {turning / (spec.dim // 2):g} (the slowest pairs stand still)"
    return "the whole head"


def _rope_words(config: Any, layer_idx: int, spec: Rope) -> str:
    """A RoPE layer's spec in words: base, extension, rotary part, head dimension."""
    parameters = hf_rope_parameters(*_rope_source(config, layer_idx))
    extension = str(parameters.get("rope_type", "default"))
    if "factor" in parameters and extension != "default":
        extension += f" x{float(parameters['factor']):g}"
    base = float(parameters["rope_theta"])
    words = f"base {int(base):,}, " if base.is_integer() else f"base {base:g}, "
    words += f"{extension}, "
    if _model_type(config) in DECOUPLED:
        unrotated = int(config_field(config, "qk_nope_head_dim"))
        return words + f"decoupled: {spec.dim} features turn beside {unrotated} that do not"
    return words + _rotary_part(spec) + ("" if spec.partial else f", head {spec.dim}")


def _compressed_words(config: Any, layers: list[int]) -> str:
    """DeepSeek-V4's layers of one compressed type in words: how many, one entry per how
    many positions, and which entries a query reads."""
    rate = compress_rate(config, layers[0])
    if layer_type(config, layers[0]) == "compressed_sparse_attention":
        top = int(config_field(config, "index_topk"))
        return f"{len(layers)} CSA: 1 entry per {rate} positions, an indexer's top {top} read"
    return f"{len(layers)} HCA: 1 entry per {rate} positions, all read"


def _first(layers: list[int], shown: int = 4) -> str:
    """``[3, 7, 11, 15, ...]``: the first few layer indices."""
    return str(layers[:shown])[:-1] + (", ...]" if len(layers) > shown else "]")


def design_row(config: Any) -> dict[str, str]:
    """One model's RoPE design in the course's terms, a row of chapter 10's table.

    Every entry is read from ``config`` (a transformers configuration object or
    dict) through the functions of this module, except the norms and sinks, which
    the family's code fixes (:data:`QK_NORMS`, :data:`SINKS`).

    Returns:
        ``{"model", "layout", "RoPE", "NoPE layers", "linear-attention layers",
        "local layers", "placement", "QK norm", "sinks", "multimodal RoPE"}``, each
        a short string ("multimodal RoPE" is "none" for a ladder of one axis, also in
        a model that reads images).
    """
    model_type = _model_type(config)
    count = _layer_count(config)
    rope_layers = [i for i in range(count) if uses_rope(config, i)]
    by_type: dict[str, str] = {}
    for i in rope_layers:  # one spec read per layer type
        kind = layer_type(config, i)
        spec = None if kind in by_type else layer_rope(config, i)
        if spec is not None:
            by_type[kind] = _rope_words(config, i, spec)
    if len(set(by_type.values())) == 1:
        rope = next(iter(by_type.values()))
    else:
        rope = "; ".join(f"{kind}: {words}" for kind, words in by_type.items())
    linear = [i for i in range(count) if layer_type(config, i) in LINEAR_LAYER_TYPES]
    nope = [i for i in range(count) if i not in rope_layers and i not in linear]
    compressed = [i for i in range(count) if layer_type(config, i) in COMPRESSED_LAYER_TYPES]
    plain = [i for i in range(count) if i not in compressed]
    windows = [local for i in plain if (local := layer_local(config, i)) is not None]
    if compressed:  # DeepSeek-V4: every layer keeps a window; some add compressed entries
        window = int(config_field(config, "sliding_window"))
        local_words = f"{count} of {count}: window of {window}; " + "; ".join(
            _compressed_words(config, [i for i in compressed if layer_type(config, i) == kind])
            for kind in sorted({layer_type(config, i) for i in compressed})  # CSA, HCA
        )
    elif windows:
        shapes = sorted({(local.kind, local.size) for local in windows})
        kinds = ", ".join(f"{kind} of {size}" for kind, size in shapes)
        local_words = f"{len(windows)} of {count}: {kinds}"
    else:
        local_words = "none"
    placements = sorted({layer_placement(config, i) for i in rope_layers})
    placement = " / ".join(placements)
    if model_type == "deepseek_v4":
        placement += " (one projection is key and value: VO-RoPE)"
    elif config_field(config, "attention_k_eq_v"):
        placement += " (full layers: value = key projection, not rotated)"
    sections = mrope_sections(config)
    return {
        "model": model_type,
        "layout": LAYOUTS[model_type],
        "RoPE": rope,
        "NoPE layers": f"{len(nope)} of {count}" + (f": {_first(nope)}" if nope else ""),
        "linear-attention layers": f"{len(linear)} of {count}",
        "local layers": local_words,
        "placement": placement,
        "QK norm": QK_NORMS.get(model_type, "not recorded"),
        "sinks": "learned, one per head" if model_type in SINKS else "none",
        "multimodal RoPE": (
            "none" if sections is None else f"{sections[1]} sections {sections[0]}"
        ),
    }


# The columns of chapter 10's three tables of design_row rows.
DESIGN_COLUMNS: dict[str, list[str]] = {
    "rotation": ["layout", "RoPE", "placement"],
    "layers": ["NoPE layers", "linear-attention layers", "local layers"],
    "around": ["QK norm", "sinks", "multimodal RoPE"],
}


def design_table(
    rows: list[dict[str, str]], keys: list[str], names: list[str] | None = None
) -> str:
    """:func:`design_row` rows as a Markdown table: one line per model, a column per key.

    Args:
        rows: the rows, each with every one of ``keys``.
        keys: the columns, e.g. ``["layout", "RoPE"]``.
        names: the models' names in the first column (default: each row's ``"model"``).
    """
    if not rows:
        raise ValueError("no rows to tabulate")
    names = names if names is not None else [row["model"] for row in rows]
    if len(names) != len(rows):
        raise ValueError(f"{len(names)} names for {len(rows)} rows")
    for key in keys:
        if any(key not in row for row in rows):
            raise ValueError(f"no column {key!r}; a row has {sorted(rows[0])}")
    lines = ["| model | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name, row in zip(names, rows, strict=True):
        cells = (row[key].replace("|", "/") for key in keys)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cached_features(config: Any, layer_idx: int) -> int:
    """Numbers a layer keeps in its cache per position: keys and values of its
    key-value heads, or one tensor where the key is the value (DeepSeek-V4).

    A sliding layer keeps them only for the positions of its window. DeepSeek-V4
    caches one head of ``head_dim`` (K = V), in every layer only for its window
    (transformers keeps the last ``sliding_window - 1`` positions); its compressed
    layers keep the rest of the past as :func:`compressed_features`. Everyone else caches
    ``2 * num_key_value_heads * head_dim``, Gemma 4's full layers with
    ``attention_k_eq_v`` included: their key and value come from one projection, but
    the key is normed and turned and the value normed apart, and transformers' cache
    keeps both tensors.
    MLA (DeepSeek-V3) caches its compressed latent and the shared RoPE key:
    ``kv_lora_rank + qk_rope_head_dim``. Linear-attention layers keep a state,
    not a cache, and are refused.
    """
    model_type = _model_type(config)
    kind = layer_type(config, layer_idx)
    if kind in LINEAR_LAYER_TYPES:
        raise ValueError(f"layer {layer_idx} is {kind}: it keeps a state, not a cache")
    if model_type in DECOUPLED:
        latent = int(config_field(config, "kv_lora_rank"))
        return latent + int(config_field(config, "qk_rope_head_dim"))
    dim = hf_head_dim(config, kind)  # per layer type where it differs (Gemma 4)
    if model_type == "deepseek_v4":
        return dim
    source = _for_layer_type(config, kind)
    heads = config_field(source, "num_key_value_heads") or config_field(
        source, "num_attention_heads"
    )
    return int(heads) * dim * 2
