"""rope-lessons: the helper package of an executable course on rotary position embeddings.

The names most experiments need are importable from the top level::

    from rope_lessons import Rope, apply_rope, attention, ModelConfig, TinyTransformer

The package is built in layers, one folder each; a layer imports only the layers
below it (``import-linter`` checks this in CI, see ``pyproject.toml``):

* :mod:`rope_lessons.sweeps` and :mod:`rope_lessons.real` (top, independent of each
  other): the stored multi-seed experiments, one module each, with their command
  line; the pretrained SmolLM2-135M, its readings and stored sweeps, the
  production models of 2025-2026 and the transformers layer checks;
* :mod:`rope_lessons.chapters`: each chapter's measurements (decay, spectrum,
  ablation, VO-RoPE, recurrence, extension surgery, the long-context benchmark)
  and the figures;
* :mod:`rope_lessons.evidence`: the training loop, presets, multi-seed runs,
  paired comparisons and the evidence rule, ranking, learning curves, timing,
  and the stored-sweep machinery (definition, store, reproduction);
* :mod:`rope_lessons.toy`: attention with RoPE at nine placements, the toy
  transformer and its data (synthetic tasks, the corpus, n-grams);
* :mod:`rope_lessons.rope` (bottom): RoPE as pure formulas: the spec, the
  frequency ladder, the kernel and its teaching forms, the extension formulas,
  2D and multimodal RoPE, precision, the general solution, the Hugging Face
  configuration reader and :func:`~rope_lessons.rope.check.check_rope`;

and, beneath them all, ``rope_lessons._checks``: argument checks and the
``Literal`` types shared by every layer.
"""

from rope_lessons.evidence.runtime import setup
from rope_lessons.evidence.training import evaluate, train
from rope_lessons.rope.check import check_rope
from rope_lessons.rope.kernels import apply_rope, read_pairs, score_at_distance
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import ModelConfig, TinyTransformer
from rope_lessons.toy.rotary_attention import attention, rotate_inputs, rotate_output

__version__ = "0.1.0"

__all__ = [
    "CharCorpus",
    "ModelConfig",
    "Rope",
    "TinyTransformer",
    "apply_rope",
    "attention",
    "check_rope",
    "evaluate",
    "frequencies",
    "read_pairs",
    "rotate_inputs",
    "rotate_output",
    "score_at_distance",
    "setup",
    "train",
]
