"""Training and the evidence rule: the layer above :mod:`rope_lessons.toy`.

This folder holds how a toy run is trained, repeated over seeds and read:
:mod:`~rope_lessons.evidence.runtime`, the device, preset and seed that open
every notebook; :mod:`~rope_lessons.evidence.training`, the training and
evaluation loops; :mod:`~rope_lessons.evidence.runs`, one run's recipe, result,
seeds and metrics; :mod:`~rope_lessons.evidence.comparisons`, summaries over
seeds, paired comparisons and the evidence rule's family-wise intervals;
:mod:`~rope_lessons.evidence.ranking`, rank agreement and the pairs that seeds
resolve; :mod:`~rope_lessons.evidence.learning_curves`, smoothed curves over
seeds; :mod:`~rope_lessons.evidence.benchmark`, RoPE's forms timed as ratios;
and the stored-sweep machinery: :mod:`~rope_lessons.evidence.sweep`, a sweep's
definition; :mod:`~rope_lessons.evidence.store`, its results files, written
and verified; :mod:`~rope_lessons.evidence.reproduction`, what the stored
results show and whether a re-run reproduces them. It may import
:mod:`rope_lessons.toy`, :mod:`rope_lessons.rope` and ``rope_lessons._checks``:
no chapter, no stored sweep, no real model and no transformers.
"""
