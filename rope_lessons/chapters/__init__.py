"""Each chapter's measurements: the layer above :mod:`rope_lessons.evidence`.

This folder holds what the chapters measure, in chapter order:
:mod:`~rope_lessons.chapters.nope`, attention without a position encoding and what a
causal mask gives back (chapter 1); :mod:`~rope_lessons.chapters.decay_bounds`,
RoFormer's decay bound and its critique on random vectors, and
:mod:`~rope_lessons.chapters.decay`, what a trained model's attention does with
distance (chapter 4); :mod:`~rope_lessons.chapters.spectrum`, what each frequency
does: wavelengths, per-pair norms, truncated spectra, positional heads (chapter 5);
:mod:`~rope_lessons.chapters.ablation`, rotary pairs removed at inference, by zero
or by mean (chapters 5 and 9); :mod:`~rope_lessons.chapters.vo_rope`, shared keys
and values, cache sizes, readings and rank agreement (chapter 6);
:mod:`~rope_lessons.chapters.recurrence`, linear recurrences with real and complex
decay and the road to them from VO-RoPE, :mod:`~rope_lessons.chapters.scan`, their
associative-scan and FFT forms, and :mod:`~rope_lessons.chapters.recurrent_models`,
small sequence models built on them (chapter 7);
:mod:`~rope_lessons.chapters.extension`, a trained model given a new spec, with its
losses, entropy and short fine-tunes, and
:mod:`~rope_lessons.chapters.long_context`, the copy-in-text benchmark (chapter 8);
and the pages' media: :mod:`~rope_lessons.chapters.figures`, figures saved for the
prose pages, and :mod:`~rope_lessons.chapters.animation`, animations that play
offline. It may import :mod:`rope_lessons.evidence`, :mod:`rope_lessons.toy`,
:mod:`rope_lessons.rope` and ``rope_lessons._checks``.
"""
