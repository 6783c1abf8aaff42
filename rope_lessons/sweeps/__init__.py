"""The stored sweeps: one module per sweep, each defining ``SWEEP = Sweep(...)``.

The module name is the sweep's name (``ch03_order``: chapter 3, the order
task). :func:`available` discovers them, :func:`get_sweep` returns one's
definition, ``python -m rope_lessons.sweeps NAME`` trains it (the command line is
:mod:`rope_lessons.sweeps.__main__`), and :func:`load_sweep` reads and verifies
its results from ``rope_lessons/results/NAME.json``
(:mod:`rope_lessons.evidence.store`).

This package sits on top of the evidence layer: it may import
:mod:`rope_lessons.evidence`, the toy models and the chapters' measurements, and
nothing imports it but the notebooks, the tests and its own command line
(:mod:`rope_lessons.real` stays independent of it).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from rope_lessons.evidence.reproduction import StoredSweep
from rope_lessons.evidence.store import load_stored
from rope_lessons.evidence.sweep import Sweep

SWEEPS_PACKAGE = "rope_lessons.sweeps"


def available() -> list[str]:
    """Names of the sweeps defined in :mod:`rope_lessons.sweeps`."""
    package = importlib.import_module(SWEEPS_PACKAGE)
    return sorted(
        m.name
        for m in pkgutil.iter_modules(package.__path__)
        if not m.ispkg and not m.name.startswith("_")
    )


def get_sweep(name: str) -> Sweep:
    """The sweep defined by ``rope_lessons/sweeps/<name>.py``.

    Raises:
        ValueError: if there is no such sweep, or its module does not define
            ``SWEEP`` as a :class:`~rope_lessons.evidence.sweep.Sweep` of that name.
    """
    names = available()
    if name not in names:
        raise ValueError(f"no sweep named {name!r}; the sweeps are {names}")
    module = importlib.import_module(f"{SWEEPS_PACKAGE}.{name}")
    sweep = getattr(module, "SWEEP", None)
    if not isinstance(sweep, Sweep):
        raise ValueError(f"{SWEEPS_PACKAGE}.{name} must define SWEEP = Sweep(...)")
    if sweep.name != name:
        raise ValueError(f"{SWEEPS_PACKAGE}.{name} defines a sweep named {sweep.name!r}")
    return sweep


def load_sweep(sweep: str | Sweep, results_dir: Path | None = None) -> StoredSweep:
    """Read and verify a sweep's stored results.

    Args:
        sweep: a sweep name (see :func:`available`) or a :class:`~.Sweep`.
        results_dir: a folder to read from instead of the installed package's.

    Raises:
        ValueError: if there are no results, the file was edited (hash), or it
            was made by another version or another configuration of the sweep.
    """
    return load_stored(get_sweep(sweep) if isinstance(sweep, str) else sweep, results_dir)
