r"""The RoPE settings that real models were released with, stored in the package (chapter 10).

Each file of ``rope_lessons/data/published/`` holds the position-relevant
fields of one released model's configuration, as its publisher wrote them
(field names and nesting of the model's ``config.json``, the text part only for
a multimodal model), with the model's id, where the values were read (a
repository, path and commit, or a URL) and the transformers version whose
configuration class and modeling code the course reads them with. Nothing is
downloaded: the values were copied once, and ``PROVENANCE.md`` beside them
says from where.

:func:`published_config` turns a record into the family's transformers
configuration object, so that :mod:`rope_lessons.real.production` reads it as it
reads any configuration; :func:`reach` reads, per RoPE layer type, how far the
model's ladder turns within its context and how far its extension keeps every
pair on angles met in training.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rope_lessons.real.production import (
    COMPRESSED_LAYER_TYPES,
    LAYOUTS,
    ROTARY_SLICES,
    _rope_source,
    layer_local,
    layer_type,
    quiet_transformers,
    uses_rope,
)
from rope_lessons.rope.hf_config import (
    config_field,
    hf_rope_parameters,
)
from rope_lessons.rope.scaled_specs import safe_distances
from rope_lessons.rope.spec import Rope

PUBLISHED_DIR = Path(__file__).resolve().parents[1] / "data" / "published"
# The models of chapter 10's tables, in their order: chapter 9's model, then one
# released model per family.
FEATURED: tuple[str, ...] = (
    "smollm2_135m",
    "smollm3_3b",
    "llama4_scout_17b_16e",
    "gpt_oss_120b",
    "gemma4_31b",
    "deepseek_v4_flash",
    "deepseek_v3",
    "qwen3_5_0_8b",
)
# Extension methods that change the ladder past a pretraining length (the rest leave it).
EXTENSIONS = frozenset({"linear", "dynamic", "yarn", "llama3", "longrope"})


@dataclass(frozen=True)
class Published:
    """One released model's position-relevant configuration and where it was read.

    Attributes:
        name: the file's stem (``"gpt_oss_120b"``).
        model_id: the model's id where it was published (``"openai/gpt-oss-120b"``).
        model_type: transformers' ``model_type`` for the fields (the text model's
            for a multimodal one).
        fields: the configuration fields, as published (a multimodal model's
            ``text_config``).
        source: where they were read: ``{"url", "repository", "path", "commit",
            "kind"}`` (some may be absent).
        notes: what was mapped, checked against a second source, or left out.
    """

    name: str
    model_id: str
    model_type: str
    fields: dict[str, Any]
    source: dict[str, Any]
    notes: str


def published_names() -> list[str]:
    """The stored models, sorted by name."""
    return sorted(path.stem for path in PUBLISHED_DIR.glob("*.json"))


def load_published(name: str) -> Published:
    """The stored record ``name`` (one of :func:`published_names`).

    Raises:
        ValueError: for a name without a file, or a file without the record's keys.
    """
    path = PUBLISHED_DIR / f"{name}.json"
    if name not in published_names():
        raise ValueError(f"no published configuration {name!r}; stored: {published_names()}")
    record = json.loads(path.read_text())
    missing = {"model_id", "model_type", "config", "source"} - set(record)
    if missing:
        raise ValueError(f"{path.name} lacks {sorted(missing)}")
    fields = record["config"]
    if set(fields) == {"text_config"}:  # a multimodal model: its text model's fields
        fields = fields["text_config"]
    return Published(
        name=name,
        model_id=record["model_id"],
        model_type=record["model_type"],
        fields=fields,
        source=record["source"],
        notes=record.get("notes", ""),
    )


def published_config(name: str) -> Any:
    """The record's fields as the family's transformers configuration object.

    The configuration class fills what the file leaves out with its defaults and
    derives what the family derives (e.g. SmolLM3's ``no_rope_layers`` from
    ``no_rope_layer_interval``), as it does when it loads the model's
    ``config.json``. Needs transformers 5.
    """
    from transformers import AutoConfig

    record = load_published(name)
    with quiet_transformers():
        return AutoConfig.for_model(record.model_type, **record.fields)


@dataclass(frozen=True)
class Reach:
    """How far one layer type's ladder turns within the model's contexts.

    Attributes:
        layer_type: the layer type (``"full_attention"``, ...).
        spec: the spec the model reads at its full context (extension applied).
        trained: the ladder before extension (equal to ``spec`` without one).
        pretrained_length: the length the ladder was trained at before extension
            (``original_max_position_embeddings``), or the context where the
            configuration has no extension (it states no other length).
        context: ``max_position_embeddings``.
        extension: the ``rope_type`` (``"default"`` without one).
        full: kept pairs whose wavelength is at most ``pretrained_length`` (they
            turn fully within it, as :func:`~rope_lessons.rope.scaling.critical_pair`
            counts); from pair ``full`` on (the critical pair) they turn only partly.
        kept: pairs that rotate at all (p-RoPE stops the rest).
        safe_distance: the longest distance up to which the spec keeps every pair
            on angles the trained ladder met within ``pretrained_length``
            (:func:`~rope_lessons.rope.scaled_specs.safe_distances`), ``inf`` if every
            distance is safe.
        reads: the longest distance a query of this layer type reads: the
            context's, or its window's or chunk's (DeepSeek-V4's compressed layers
            may read an entry from anywhere in the context: HCA all of them, CSA
            the indexer's top ``index_topk``).
    """

    layer_type: str
    spec: Rope
    trained: Rope
    pretrained_length: int
    context: int
    extension: str
    full: int
    kept: int
    safe_distance: float
    reads: int

    @property
    def critical_pair(self) -> int:
        """The first kept pair that does not turn fully within the pretrained length."""
        return self.full

    @property
    def full_fraction(self) -> float:
        """The share of kept pairs that turn fully within the pretrained length."""
        return self.full / self.kept

    @property
    def safe(self) -> bool:
        """Whether every distance the layer reads keeps every pair on trained angles."""
        return self.safe_distance >= self.reads


def _turning(spec: Rope) -> Rope:
    """The spec of the features that turn (all of them unless HF partial rotary)."""
    return Rope.from_theta(spec.theta, spec.layout) if spec.partial else spec


def reach(config: Any) -> list[Reach]:
    """Per RoPE layer type of ``config`` (a transformers configuration or dict): its
    ladder, how many kept pairs turn fully within the pretrained length, and how far
    its extension keeps every pair on trained angles."""
    model_type = str(config_field(config, "model_type"))
    context = int(config_field(config, "max_position_embeddings"))
    count = int(config_field(config, "num_hidden_layers"))
    rows: dict[str, Reach] = {}
    for i in range(count):
        kind = layer_type(config, i)
        if kind in rows or not uses_rope(config, i):
            continue
        source, source_kind = _rope_source(config, i)
        parameters = hf_rope_parameters(source, source_kind)
        extension = str(parameters.get("rope_type", "default"))
        spec = Rope.from_hf(
            source,
            source_kind,
            seq_len=context if extension in {"dynamic", "longrope"} else None,
            layout=LAYOUTS[model_type],
            rotary_slice=ROTARY_SLICES.get(model_type, "leading"),
        )
        if extension in EXTENSIONS:
            trained = Rope(  # the same head and rotary part, without the scaling
                spec.dim,
                float(parameters["rope_theta"]),
                spec.layout,
                rotary_dim=spec.rotary_dim,
                rotary_slice=spec.rotary_slice,
            )
            pretrained = int(
                parameters.get("original_max_position_embeddings")
                or config_field(config, "original_max_position_embeddings")
            )
            safe = float(safe_distances(_turning(spec), _turning(trained), pretrained).min())
        else:
            trained, pretrained, safe = spec, context, math.inf
        # chapter 8's critical pair: kept pairs with a wavelength up to the trained length
        # turn fully (extension.critical_pair, for any ladder)
        kept = trained.theta > 0  # (r/2,)
        full = kept & (2.0 * math.pi / trained.theta <= pretrained)
        # DeepSeek-V4's compressed layers may read compressed entries of the whole past
        local = None if kind in COMPRESSED_LAYER_TYPES else layer_local(config, i)
        if extension not in EXTENSIONS and bool((kept & ~full).any()):
            safe = float(pretrained - 1)  # unscaled: partly turning pairs leave their arc
        rows[kind] = Reach(
            layer_type=kind,
            spec=spec,
            trained=trained,
            pretrained_length=pretrained,
            context=context,
            extension=extension,
            full=int(full.sum()),
            kept=int(kept.sum()),
            safe_distance=safe,
            reads=context - 1 if local is None else min(local.size, context) - 1,
        )
    return list(rows.values())
