"""Graded exercises: one or more checkers per chapter, the top layer.

Each module is named after its chapter's page (``book/05_frequencies.md`` has
:mod:`~rope_lessons.practice.frequencies`) and holds checkers that run a
function the reader wrote, compare it with the course's reference and name the
bug, as :func:`~rope_lessons.rope.check.check_rope` does for chapter 3. Every
checker returns a :class:`~rope_lessons._grading.Report`. The notebooks
``notebooks/NN_practice.ipynb`` pose the exercises. This folder may import every
other layer; nothing in the package imports it.
"""
