"""The stored sweeps: one module per sweep, each defining ``SWEEP = Sweep(...)``.

The module name is the sweep's name (``ch03_order``: chapter 3, the order
task). :func:`rope_lessons.sweep.available` discovers them; ``python -m
rope_lessons.sweep NAME`` trains one; :func:`rope_lessons.sweep.load_sweep`
reads its results from ``rope_lessons/results/NAME.json``.
"""
