r"""Chapter 10's exercise: read a published configuration into its design, layer by layer.

Chapter 10 reads each released model's configuration in the course's terms:
which layers rotate (NoPE layers in SmolLM3 and Llama 4, linear-attention
layers in Qwen3.5), with which base and RoPE type per layer type (Gemma 4's
sliding and full layers differ), how much of each head turns (p-RoPE in Gemma
4's full layers, Hugging Face's partial rotary in Qwen3.5), and which keys a
query sees (windows, chunks). The reader writes ``fn(config)`` that returns one
:class:`LayerDesign` per layer; :func:`check_layer_designs` runs it on the
configurations stored in ``rope_lessons/data/published`` and compares it with
:func:`layer_designs`, which reads the same facts from transformers' own
configuration object through :mod:`rope_lessons.real.production`'s readers.

When ``fn`` differs, the checker names the bug: NoPE layers missed or shifted by
one layer, linear-attention layers given RoPE, layer types read one layer off,
one set of RoPE parameters used for every layer type (the global base in the
local layers, or the reverse), ``partial_rotary_factor`` ignored or p-RoPE and
partial rotary confused, the extension's ``rope_type`` dropped, Gemma 4's
``global_head_dim`` missed, local layers missed, swapped with the global ones,
made of every layer, chunks read as windows, or windows one layer off.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from rope_lessons._grading import Report, raised, unrecognised
from rope_lessons.real.production import (
    LAYOUTS,
    LINEAR_LAYER_TYPES,
    _rope_source,
    layer_local,
    layer_type,
    uses_rope,
)
from rope_lessons.real.published import EXTENSIONS, load_published, published_config
from rope_lessons.rope.hf_config import hf_rope_parameters, hf_rotary_dim
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import Local

__all__ = [
    "CASES",
    "LayerDesign",
    "check_layer_designs",
    "layer_designs",
    "published_fields",
]

# The stored configurations the checker reads, one per family whose every layer has a
# window or none (DeepSeek-V4's compressed layers add entries of the whole past, and
# DeepSeek-V3's decoupled RoPE sizes its rotating part apart: both are left out).
CASES: tuple[str, ...] = (
    "smollm2_135m",
    "smollm3_3b",
    "llama4_scout_17b_16e",
    "gpt_oss_120b",
    "gemma4_31b",
    "qwen3_5_0_8b",
)
# Layer lists that transformers' configuration class derives where a publisher left
# them out (Llama 4 Scout's, from no_rope_layer_interval and attention_chunk_size).
_DERIVED_LISTS = ("layer_types", "no_rope_layers")


class LayerDesign(NamedTuple):
    r"""What one layer does with positions.

    Attributes:
        base: ``rope_theta`` of the layer's RoPE parameters; None for a layer
            that does not rotate (NoPE, linear attention).
        rope_type: their ``rope_type`` (``"default"``, ``"yarn"``, ``"llama3"``,
            ``"proportional"``...); None without RoPE.
        turning: the rotary pairs that turn, :math:`\theta_k > 0`; 0 without RoPE.
        ladder_dim: the ``d`` of the ladder :math:`\theta_k = \text{base}^{-2k/d}`:
            the head dimension, or the rotating slice's for Hugging Face's partial
            rotary (p-RoPE keeps the head's ladder and stops its slowest pairs);
            0 without RoPE.
        local: the keys a query sees beyond the causal mask, ``Local(size,
            "window")`` or ``Local(size, "chunk")``; None for the whole past.
    """

    base: float | None
    rope_type: str | None
    turning: int
    ladder_dim: int
    local: Local | None


def _no_rope(local: Local | None) -> LayerDesign:
    return LayerDesign(None, None, 0, 0, local)


def _rotating(parameters: dict[str, Any], spec: Rope, local: Local | None) -> LayerDesign:
    return LayerDesign(
        float(parameters["rope_theta"]),
        str(parameters.get("rope_type", "default")),
        int((spec.theta > 0).sum()),
        spec.rotary_dim,
        local,
    )


def _as_if_rotating(config: Any, layer_idx: int) -> tuple[dict[str, Any], Rope]:
    """The RoPE parameters and spec of layer ``layer_idx``'s type, whether or not it
    rotates (those :func:`~rope_lessons.real.production.layer_rope` reads)."""
    source, kind = _rope_source(config, layer_idx)
    spec = Rope.from_hf(source, kind, layout=LAYOUTS[str(config.model_type)])
    return hf_rope_parameters(source, kind), spec


def layer_designs(config: Any) -> list[LayerDesign]:
    """Each layer's :class:`LayerDesign`, read by :mod:`rope_lessons.real.production`.

    Args:
        config: a transformers configuration object (e.g.
            :func:`~rope_lessons.real.published.published_config`) of a family whose
            layers are all read by :func:`~rope_lessons.real.production.layer_local`.
    """
    designs = []
    for i in range(int(config.num_hidden_layers)):
        local = layer_local(config, i)
        if uses_rope(config, i):
            designs.append(_rotating(*_as_if_rotating(config, i), local))
        else:
            designs.append(_no_rope(local))
    return designs


@functools.cache
def _config(name: str) -> Any:
    return published_config(name)


def published_fields(name: str) -> dict[str, Any]:
    """The configuration ``fn`` reads: the stored record's fields as published, with
    ``model_type``, and the layer lists transformers derives where the publisher left
    them out (``layer_types``, ``no_rope_layers``). A fresh dict on every call."""
    record = load_published(name)
    fields: dict[str, Any] = {"model_type": record.model_type, **record.fields}
    config = _config(name)
    for field in _DERIVED_LISTS:
        derived = getattr(config, field, None)
        if not fields.get(field) and derived:
            fields[field] = list(derived)
    return fields


@dataclass(frozen=True, eq=False)
class _Case:
    name: str
    config: Any  # the transformers configuration object
    fields: dict[str, Any]
    reference: list[LayerDesign]

    @property
    def count(self) -> int:
        return len(self.reference)

    @property
    def short(self) -> str:
        """The stored configuration's name."""
        return self.name.split(" ", 1)[0]

    def types(self) -> list[str]:
        return [layer_type(self.config, i) for i in range(self.count)]


@functools.cache
def _case(name: str) -> _Case:
    config = _config(name)
    fields = published_fields(name)
    label = f"{name} ({fields['model_type']}, {config.num_hidden_layers} layers)"
    return _Case(label, config, fields, layer_designs(config))


def _layers(indices: Sequence[int], shown: int = 4) -> str:
    listed = ", ".join(str(i) for i in indices[:shown])
    return f"[{listed}{', ...' if len(indices) > shown else ''}]"


# The bugs, one component of a layer's design at a time: which layers rotate (_flags),
# what a rotating layer's RoPE is (_ropes), which keys it sees (_locals); and the layer
# types read one layer off (_types), which moves all three.


def _types(case: _Case, shift: int) -> list[str]:
    """The layer types, layer ``i`` read as layer ``i - shift``'s (cyclically)."""
    types = case.types()
    return [types[(i - shift) % case.count] for i in range(case.count)]


def _flags(case: _Case, variant: str, shift: int) -> list[bool]:
    """Which layers rotate, as a variant reads it (with the layer types shifted)."""
    n = case.count
    linear = [kind in LINEAR_LAYER_TYPES for kind in _types(case, shift)]
    flags = case.fields.get("no_rope_layers") or [1] * n
    nope = [not flags[i] for i in range(n)]
    if variant == "right":
        return [not (nope[i] or linear[i]) for i in range(n)]
    if variant == "nope_missed":
        return [not linear[i] for i in range(n)]
    if variant == "linear_rotates":
        return [not nope[i] for i in range(n)]
    if variant in ("nope_later", "nope_earlier"):
        step = 1 if variant == "nope_later" else -1
        return [not (nope[(i - step) % n] or linear[i]) for i in range(n)]
    raise ValueError(variant)


def _ropes(case: _Case, variant: str, shift: int) -> list[LayerDesign]:
    """Each layer's design as if it rotated (the local part left None), as a variant
    reads it (with the layer types shifted)."""
    by_type: dict[str, tuple[dict[str, Any], Rope]] = {}
    for i, kind in enumerate(case.types()):
        by_type.setdefault(kind, _as_if_rotating(case.config, i))
    designs = []
    for kind in _types(case, shift):
        parameters, spec = by_type[kind]
        used = kind
        if variant == "global_everywhere" and "full_attention" in by_type:
            used = "full_attention"
        elif variant == "local_everywhere" and "sliding_attention" in by_type:
            used = "sliding_attention"
        if by_type[used][0] != parameters:  # another type's parameters on this layer's head
            parameters = by_type[used][0]
            spec = Rope.from_hf({"head_dim": spec.dim, "rope_parameters": parameters})
        rope_type = str(parameters.get("rope_type", "default"))
        factor = float(parameters.get("partial_rotary_factor", 1.0))
        base = float(parameters["rope_theta"])
        if variant == "factor_ignored" and factor < 1.0:
            spec = Rope(spec.dim, base)
        elif variant == "prope_as_partial" and rope_type == "proportional":
            read = {**parameters, "rope_type": "default"}
            rotary = hf_rotary_dim({"head_dim": spec.dim, "rope_parameters": read})
            spec = Rope(spec.dim, base, rotary_dim=rotary)
        elif variant == "partial_as_prope" and rope_type == "default" and factor < 1.0:
            spec = Rope(spec.dim, base, p=factor)
        elif variant == "head_dim_missed":
            head = case.fields.get("head_dim")
            simple = rope_type in ("default", "proportional")
            if isinstance(head, int) and head != spec.dim and simple:
                spec = Rope.from_hf({"head_dim": head, "rope_parameters": parameters})
        design = _rotating(parameters, spec, None)
        if variant == "scaling_ignored" and rope_type in EXTENSIONS:
            design = design._replace(rope_type="default")
        designs.append(design)
    return designs


def _locals(case: _Case, variant: str, shift: int) -> list[Local | None]:
    n = case.count
    types = case.types()
    of_type = {kind: layer_local(case.config, types.index(kind)) for kind in set(types)}
    right = [of_type[kind] for kind in _types(case, shift)]
    seen = next((local for local in of_type.values() if local is not None), None)
    if variant == "right":
        return right
    if variant == "none":
        return [None] * n
    if variant == "swapped":
        return [seen if local is None else None for local in right]
    if variant == "everywhere":
        return [seen] * n
    if variant == "chunk_as_window":
        return [Local(local.size, "window") if local is not None else None for local in right]
    if variant in ("later", "earlier"):
        step = 1 if variant == "later" else -1
        return [right[(i - step) % n] for i in range(n)]
    raise ValueError(variant)


_FLAG_VARIANTS = ("right", "nope_missed", "linear_rotates", "nope_later", "nope_earlier")
_ROPE_VARIANTS = (
    "right",
    "global_everywhere",
    "local_everywhere",
    "factor_ignored",
    "prope_as_partial",
    "partial_as_prope",
    "scaling_ignored",
    "head_dim_missed",
)
_LOCAL_VARIANTS = ("right", "none", "swapped", "everywhere", "chunk_as_window", "later", "earlier")
_SHIFTS = (0, 1, -1)


def _first_shown(cases: Sequence[_Case], differs: Callable[[_Case], bool]) -> _Case:
    """The first case where a variant differs from the reading (the first case if none)."""
    return next((case for case in cases if differs(case)), cases[0])


def _flag_message(variant: str, cases: Sequence[_Case]) -> str:
    case = _first_shown(cases, lambda c: _flags(c, variant, 0) != _flags(c, "right", 0))
    right = _flags(case, "right", 0)
    got = _flags(case, variant, 0)
    stopped = [i for i, rotates in enumerate(right) if not rotates]
    name = case.short
    if variant == "nope_missed":
        nope = [i for i in stopped if case.types()[i] not in LINEAR_LAYER_TYPES]
        return (
            f"NoPE layers missed: fn gives RoPE to the layers that no_rope_layers marks 0, "
            f"{_layers(nope)} in {name}; no_rope_layers[i] is 1 where layer i rotates and 0 "
            "where it attends without positions"
        )
    if variant == "linear_rotates":
        linear = [i for i, kind in enumerate(case.types()) if kind in LINEAR_LAYER_TYPES]
        return (
            f"linear-attention layers given RoPE: in {name} layers {_layers(linear)} are "
            "linear_attention (layer_types), a recurrence that orders tokens without RoPE: "
            "only attention layers rotate"
        )
    wrong = [i for i, rotates in enumerate(got) if not rotates]
    return (
        f"NoPE layers shifted by one layer: fn makes layers {_layers(wrong)} NoPE where "
        f"no_rope_layers says {_layers(stopped)} ({name}); layers are counted from 0, "
        "and no_rope_layers[i] is layer i's flag (0: NoPE), as layer_types[i] is its type"
    )


def _rope_message(variant: str, cases: Sequence[_Case]) -> str:
    def differs(case: _Case) -> bool:
        flags = _flags(case, "right", 0)
        right = _ropes(case, "right", 0)
        return any(
            a != b and f for a, b, f in zip(_ropes(case, variant, 0), right, flags, strict=True)
        )

    case = _first_shown(cases, differs)
    name = case.short
    if variant in ("global_everywhere", "local_everywhere"):
        used, other = (
            ("full_attention", "sliding_attention")
            if variant == "global_everywhere"
            else ("sliding_attention", "full_attention")
        )
        what = (
            "global base used for the local layers"
            if used == "full_attention"
            else ("local base used for the global layers")
        )
        return (
            f"{what}: fn reads every layer's RoPE from the {used} parameters, but {name} "
            f"keys rope_parameters by layer type and its {other} layers have their own "
            "base and type: read rope_parameters[layer_types[i]]"
        )
    if variant == "factor_ignored":
        return (
            f"partial_rotary_factor ignored: fn turns every pair of the head, but {name}'s "
            "partial_rotary_factor turns only part of it (a slice on a ladder of its own "
            "with rope_type 'default', the fastest pairs of the head's ladder with "
            "'proportional')"
        )
    if variant == "prope_as_partial":
        return (
            f"p-RoPE read as partial rotary: {name}'s 'proportional' layers keep the whole "
            "head's ladder (ladder_dim = the head dimension) and stop all but the fastest "
            "partial_rotary_factor of its pairs; fn gave them a ladder of their own over "
            "partial_rotary_factor of the features, Hugging Face's partial rotary"
        )
    if variant == "partial_as_prope":
        return (
            f"partial rotary read as p-RoPE: with rope_type 'default', {name}'s "
            "partial_rotary_factor rotates the leading features on a ladder of their own "
            "(ladder_dim = factor x head dimension, every pair of it turning); fn kept the "
            "head's ladder and stopped its slowest pairs, which is p-RoPE ('proportional')"
        )
    if variant == "scaling_ignored":
        extension = next(
            (d.rope_type for d in case.reference if d.rope_type in EXTENSIONS), "an extension"
        )
        return (
            f"scaling ignored: fn reports rope_type 'default' where {name}'s configuration "
            f"extends the context with {extension!r} (in rope_scaling, or in rope_parameters): "
            "read the rope_type beside rope_theta"
        )
    return (
        f"the full layers' head dimension missed: {name}'s full_attention layers have heads "
        "of global_head_dim features, not head_dim: size their ladder with global_head_dim"
    )


def _local_message(variant: str, cases: Sequence[_Case]) -> str:
    case = _first_shown(cases, lambda c: _locals(c, variant, 0) != _locals(c, "right", 0))
    right = _locals(case, "right", 0)
    local = [i for i, window in enumerate(right) if window is not None]
    seen = next((window for window in right if window is not None), None)
    shape = f"{seen.kind} of {seen.size}" if seen is not None else "a window"
    name = case.short
    if variant == "none":
        return (
            f"local layers missed: fn lets every layer see the whole past, but {name}'s "
            f"layers {_layers(local)} see a {shape} (layer_types: sliding_attention, "
            "sliding_window; chunked_attention, attention_chunk_size)"
        )
    if variant == "swapped":
        return (
            f"local and global layers swapped: fn gives the {shape} to the full_attention "
            f"layers and the whole past to the local ones ({name}: local layers "
            f"{_layers(local)})"
        )
    if variant == "everywhere":
        return (
            f"every layer made local: in {name} only layers {_layers(local)} see a {shape}; "
            "the full_attention layers see the whole past"
        )
    if variant == "chunk_as_window":
        return (
            f"chunks read as windows: {name}'s chunked_attention layers see the keys of their "
            "own chunk, Local(attention_chunk_size, 'chunk'), not a sliding window"
        )
    return (
        f"local layers shifted by one layer: fn gives layer i the window of layer_types[i "
        f"{'-' if variant == 'later' else '+'} 1] ({name}: local layers {_layers(local)}); "
        "layers are counted from 0"
    )


def _shift_message(shift: int, cases: Sequence[_Case]) -> str:
    case = _first_shown(cases, lambda c: _types(c, shift) != c.types())
    types = case.types()
    first = next((i for i in range(case.count) if types[i] != types[i - shift]), 0)
    return (
        f"layer types read one layer off: fn reads layer i as layer_types[i "
        f"{'-' if shift > 0 else '+'} 1], so that in {case.short} layer {first} is read as "
        f"{types[(first - shift) % case.count]} where layer_types[{first}] is {types[first]}; "
        "layer_types[i] is layer i's type, counted from 0"
    )


@dataclass(frozen=True)
class _Candidate:
    shift: int = 0
    flags: str = "right"
    rope: str = "right"
    local: str = "right"

    @property
    def bug_count(self) -> int:
        return (self.shift != 0) + sum(
            part != "right" for part in (self.flags, self.rope, self.local)
        )

    def designs(self, case: _Case) -> list[LayerDesign]:
        flags, ropes, locals_ = _parts(case.name, self)
        return [
            design._replace(local=local) if rotates else _no_rope(local)
            for rotates, design, local in zip(flags, ropes, locals_, strict=True)
        ]

    def messages(self, cases: Sequence[_Case]) -> list[str]:
        notes = [] if self.shift == 0 else [_shift_message(self.shift, cases)]
        if self.flags != "right":
            notes.append(_flag_message(self.flags, cases))
        if self.rope != "right":
            notes.append(_rope_message(self.rope, cases))
        if self.local != "right":
            notes.append(_local_message(self.local, cases))
        return notes


@functools.cache
def _flag_part(name: str, variant: str, shift: int) -> tuple[bool, ...]:
    return tuple(_flags(_by_label(name), variant, shift))


@functools.cache
def _rope_part(name: str, variant: str, shift: int) -> tuple[LayerDesign, ...]:
    return tuple(_ropes(_by_label(name), variant, shift))


@functools.cache
def _local_part(name: str, variant: str, shift: int) -> tuple[Local | None, ...]:
    return tuple(_locals(_by_label(name), variant, shift))


def _by_label(label: str) -> _Case:
    return _case(label.split(" ", 1)[0])


def _parts(
    label: str, candidate: _Candidate
) -> tuple[tuple[bool, ...], tuple[LayerDesign, ...], tuple[Local | None, ...]]:
    return (
        _flag_part(label, candidate.flags, candidate.shift),
        _rope_part(label, candidate.rope, candidate.shift),
        _local_part(label, candidate.local, candidate.shift),
    )


def _candidates() -> list[_Candidate]:
    every = [
        _Candidate(*parts)
        for parts in itertools.product(_SHIFTS, _FLAG_VARIANTS, _ROPE_VARIANTS, _LOCAL_VARIANTS)
    ][1:]
    return sorted(every, key=lambda c: c.bug_count)


def _same(a: LayerDesign, b: LayerDesign) -> bool:
    if (a.base is None) != (b.base is None):
        return False
    if a.base is not None and b.base is not None and not math.isclose(a.base, b.base, rel_tol=1e-9):
        return False
    return a[1:] == b[1:]


def _checked(out: object, case: _Case) -> list[LayerDesign] | str:
    """``fn``'s output as designs, or what is wrong with its type or length."""
    if not isinstance(out, (list, tuple)):
        return (
            f"fn did not return a list: got {type(out).__name__} ({case.name}); return one "
            "LayerDesign per layer"
        )
    if len(out) != case.count:
        return (
            f"wrong number of layers: fn returned {len(out)} designs for the "
            f"{case.count} layers of {case.name} (num_hidden_layers)"
        )
    designs = []
    for i, entry in enumerate(out):
        if not isinstance(entry, tuple) or len(entry) != len(LayerDesign._fields):
            return (
                f"wrong entry type: layer {i} of {case.name} is {type(entry).__name__}, not a "
                "LayerDesign(base, rope_type, turning, ladder_dim, local)"
            )
        base, rope_type, turning, ladder, local = entry
        if (
            not (base is None or isinstance(base, (int, float)))
            or not (rope_type is None or isinstance(rope_type, str))
            or not isinstance(turning, int)
            or not isinstance(ladder, int)
            or not (local is None or isinstance(local, Local))
        ):
            return (
                f"wrong entry type: layer {i} of {case.name} is {entry!r}; a LayerDesign holds "
                "a float or None, a str or None, two ints and a Local or None"
            )
        designs.append(
            LayerDesign(None if base is None else float(base), rope_type, turning, ladder, local)
        )
    return designs


def _differing(designs: Sequence[LayerDesign], expected: Sequence[LayerDesign]) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(designs, expected, strict=True)) if not _same(a, b)]


def check_layer_designs(
    fn: Callable[[dict[str, Any]], Sequence[LayerDesign]],
    names: Sequence[str] = CASES,
) -> Report:
    r"""Check that ``fn`` reads each layer's design from a published configuration.

    ``fn(config)`` gets a configuration as a dict (:func:`published_fields`: the
    fields as the model's publisher wrote them, ``model_type`` among them) and
    returns a list with one :class:`LayerDesign` per layer (``num_hidden_layers``):
    its ``rope_theta`` and ``rope_type`` (None for a NoPE or linear-attention
    layer), the pairs that turn, the ``d`` of their ladder, and its window or
    chunk. It is run on each configuration of ``names`` (by default the six of
    :data:`CASES`: SmolLM2, SmolLM3, Llama 4 Scout, gpt-oss, Gemma 4, Qwen3.5) on a
    fresh copy, and compared with :func:`layer_designs` of transformers'
    configuration object, layer by layer (bases to a relative 1e-9, the rest
    exactly). The error is the number of layers that differ in a configuration.

    The diagnosis starts with one of these phrases (several bugs of one
    implementation joined by ``"; "``):

    * ``"correct"``; ``"not written yet"``; ``"fn raised"``;
    * ``"fn did not return a list"``, ``"wrong number of layers"``, ``"wrong
      entry type"``;
    * ``"NoPE layers missed"``, ``"NoPE layers shifted by one layer"`` (0- vs 1-based),
      ``"linear-attention layers given RoPE"``;
    * ``"global base used for the local layers"``, ``"local base used for the
      global layers"``, ``"layer types read one layer off"``;
    * ``"partial_rotary_factor ignored"``, ``"p-RoPE read as partial rotary"``,
      ``"partial rotary read as p-RoPE"``, ``"scaling ignored"``, ``"the full
      layers' head dimension missed"``;
    * ``"local layers missed"``, ``"local and global layers swapped"``, ``"every
      layer made local"``, ``"chunks read as windows"``, ``"local layers shifted
      by one layer"``;
    * ``"unrecognised difference"``: none of those reproduces ``fn``; it names the
      first layer that differs, with both designs.

    Args:
        fn: ``config -> [LayerDesign, ...]``.
        names: stored configurations among :data:`CASES`, at least one.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is the largest number
        of layers that differ in one configuration.

    Raises:
        TypeError: if ``fn`` is not callable or ``names`` not a sequence of str.
        ValueError: for no names or a name not among :data:`CASES`.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(config) -> [LayerDesign, ...]; got {fn!r}")
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise TypeError(f"names must be a sequence of configuration names, got {names!r}")
    if not names:
        raise ValueError("names must hold at least one configuration")
    unknown = [name for name in names if name not in CASES]
    if unknown:
        raise ValueError(f"unknown configurations {unknown}; choose among {list(CASES)}")
    cases = [_case(name) for name in names]
    labels = tuple(case.name for case in cases)
    outputs: list[list[LayerDesign]] = []
    for case in cases:
        try:
            out: object = fn(published_fields(case.short))
        except Exception as error:  # the reader's code may raise anything; a stub, too
            hint = (
                f"; {case.short} has no field {error}: the fields differ from family to "
                "family, so read the optional ones with config.get(name) and a default"
                if isinstance(error, KeyError)
                else ""
            )
            return raised(error, "fn", case.name, labels, hint=hint)
        checked = _checked(out, case)
        if isinstance(checked, str):
            return Report(False, checked, math.inf, labels, (case.name,))
        outputs.append(checked)
    differing = [_differing(o, c.reference) for o, c in zip(outputs, cases, strict=True)]
    failed = tuple(c.name for c, d in zip(cases, differing, strict=True) if d)
    largest = float(max(len(d) for d in differing))
    if not failed:
        layers = sum(case.count for case in cases)
        return Report(
            True,
            f"correct: fn reads all {layers} layers of the {len(cases)} configurations as "
            "layer_designs reads transformers' configuration objects",
            0.0,
            labels,
            (),
        )
    for candidate in _candidates():
        if all(
            not _differing(o, candidate.designs(c)) for o, c in zip(outputs, cases, strict=True)
        ):
            return Report(False, "; ".join(candidate.messages(cases)), largest, labels, failed)
    index = next(i for i, d in enumerate(differing) if d)
    case, layer = cases[index], differing[index][0]
    return Report(
        False,
        unrecognised(
            case.name,
            largest,
            f"Layer {layer}: fn gives {outputs[index][layer]}, the configuration "
            f"{case.reference[layer]}.",
        ),
        largest,
        labels,
        failed,
    )
