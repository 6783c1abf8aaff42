"""rope-lessons: the helper package of an executable course on rotary position embeddings.

The names most experiments need are importable from the top level::

    from rope_lessons import Rope, apply_rope, attention, ModelConfig, TinyTransformer

Modules, in the order the course uses them:

* :mod:`rope_lessons.attention`: attention with RoPE at any of nine placements;
* :mod:`rope_lessons.nope`: attention without positions: its symmetry, and
  what a causal mask recovers (chapter 1);
* :mod:`rope_lessons.encodings`: integer, binary and sinusoidal encodings;
* :mod:`rope_lessons.rope`: RoPE itself (the :class:`~rope_lessons.rope.Rope` spec, the
  pair reader), its matrix, complex and loop forms;
* :mod:`rope_lessons.general_solution`, :mod:`rope_lessons.layouts`,
  :mod:`rope_lessons.rope2d`, :mod:`rope_lessons.precision`: chapter 3's
  general solution, layout porting, 2D RoPE and precision measurements;
* :mod:`rope_lessons.rope_check`: checks a reader's own RoPE function against
  the reference and names its bug (chapter 3's exercises);
* :mod:`rope_lessons.decay`: RoFormer's decay bound and its critique, measured (chapter 4);
* :mod:`rope_lessons.spectrum`: pair norms, p-RoPE, partial rotary, ablations (chapter 5);
* :mod:`rope_lessons.model`, :mod:`rope_lessons.training`,
  :mod:`rope_lessons.synthetic`, :mod:`rope_lessons.corpus`: the toy models,
  their training loop and their data;
* :mod:`rope_lessons.experiments`, :mod:`rope_lessons.learning_curves`: toy
  experiments over several seeds and their summaries;
* :mod:`rope_lessons.vo_rope`: VO-RoPE's shared keys and values, cache
  bytes and the trained-model readings of chapter 6;
* :mod:`rope_lessons.ranking`: rank statistics (Kendall tau, its exact tail and
  bootstrap, which pairs of a ranking the seeds resolve);
* :mod:`rope_lessons.extension`: chapter 8's context extension (PI, NTK-aware,
  YaRN, Llama 3 tables; the base bound; extended models, band losses);
* :mod:`rope_lessons.runtime`: device, preset and seed for the notebooks;
* :mod:`rope_lessons.benchmark`: timing of the RoPE forms;
* :mod:`rope_lessons.recurrence`: linear recurrences with real and complex decay,
  VO-RoPE as one of them, and chapter 7's small recurrent models;
* :mod:`rope_lessons.scan`: the parallel forms models train with (associative
  scan, FFT convolution) and the timing of all four forms (chapter 7).
"""

from rope_lessons.attention import attention, rotate_inputs, rotate_output
from rope_lessons.corpus import CharCorpus
from rope_lessons.model import ModelConfig, TinyTransformer
from rope_lessons.rope import Rope, apply_rope, frequencies, read_pairs, score_at_distance
from rope_lessons.rope_check import check_rope
from rope_lessons.runtime import setup
from rope_lessons.training import evaluate, train

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
