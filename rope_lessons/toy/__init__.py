"""The toy models and their data: the layer above :mod:`rope_lessons.rope`.

This folder holds what the experiments train:
:mod:`~rope_lessons.toy.rotary_attention`, scaled dot-product attention with RoPE
at any of nine placements (with grouped-query heads, caches, masks and sinks);
:mod:`~rope_lessons.toy.model`, the small transformer whose position encoding is
one field of its config; :mod:`~rope_lessons.toy.layouts`, a model ported
between the interleaved and the half layouts; and its data:
:mod:`~rope_lessons.toy.synthetic`, sequence tasks that need token order;
:mod:`~rope_lessons.toy.corpus`, the character corpus that ships with the
package (*Moby-Dick*); and :mod:`~rope_lessons.toy.ngram`, the smoothed
character-bigram floor. It may import :mod:`rope_lessons.rope` and
``rope_lessons._checks``, and nothing above them.
"""
