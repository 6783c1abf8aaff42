"""Device, preset and seed: the first lines of every notebook.

A notebook declares one dictionary of settings per preset, ``"cpu"`` (small:
what CI runs on two cores) and ``"gpu"`` (larger: more steps and seeds), and
calls :func:`setup`. The preset follows the device unless the environment
variable ``ROPE_LESSONS_PRESET`` names one; ``ROPE_LESSONS_DEVICE`` forces the
device (``cpu``, ``cuda``, ``cuda:1``, ...).

``ROPE_LESSONS_SMOKE_STEPS=N`` shrinks every training loop of the package to
at most ``N`` steps (:func:`smoke_steps`): a smoke test that runs a preset's
code paths, the GPU preset's included, on the CPU in seconds. Its numbers mean
nothing, and :func:`setup` says so.

On the CPU, :func:`setup` runs PyTorch on one thread (``ROPE_LESSONS_THREADS``
overrides). The toy models are too small to gain from more, a busy machine
makes several threads much slower, and a fixed thread count keeps the order of
floating-point reductions, hence the printed results, the same on every machine.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from typing import Literal, TypeVar, get_args

import numpy as np
import torch

PRESET_ENV = "ROPE_LESSONS_PRESET"
DEVICE_ENV = "ROPE_LESSONS_DEVICE"
THREADS_ENV = "ROPE_LESSONS_THREADS"
SMOKE_ENV = "ROPE_LESSONS_SMOKE_STEPS"
Preset = Literal["cpu", "gpu"]
PRESETS: tuple[Preset, ...] = get_args(Preset)

Settings = TypeVar("Settings")


def check_device(device: torch.device | str, name: str = "device") -> torch.device:
    """``device`` as a :class:`torch.device`, if PyTorch can use it here.

    Raises:
        ValueError: if ``device`` is not a device name, or names CUDA on a
            machine without a usable CUDA GPU (or a GPU index it lacks).
    """
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"{name} must name a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"{name} is {str(parsed)!r} but CUDA is not available on this machine "
                f"(torch {torch.__version__}); use 'cpu'"
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ValueError(
                f"{name} is {str(parsed)!r} but this machine has "
                f"{torch.cuda.device_count()} CUDA device(s)"
            )
    return parsed


def choose_device() -> torch.device:
    """``$ROPE_LESSONS_DEVICE`` if set (checked: see :func:`check_device`), else CUDA
    when available, else the CPU."""
    forced = os.environ.get(DEVICE_ENV)
    if forced:
        return check_device(forced, DEVICE_ENV)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def choose_preset(device: torch.device) -> str:
    """``$ROPE_LESSONS_PRESET`` if set, else ``"gpu"`` on CUDA and ``"cpu"`` otherwise."""
    forced = os.environ.get(PRESET_ENV)
    if forced:
        if forced not in PRESETS:
            raise ValueError(f"{PRESET_ENV} must be one of {list(PRESETS)}, got {forced!r}")
        return forced
    return "gpu" if device.type == "cuda" else "cpu"


def choose_threads() -> int:
    """``$ROPE_LESSONS_THREADS`` if set, else 1."""
    forced = os.environ.get(THREADS_ENV, "1")
    if not forced.isdigit() or int(forced) < 1:
        raise ValueError(f"{THREADS_ENV} must be a positive integer, got {forced!r}")
    return int(forced)


def smoke_steps() -> int | None:
    """``$ROPE_LESSONS_SMOKE_STEPS`` if set: the most steps any training loop may take."""
    forced = os.environ.get(SMOKE_ENV)
    if not forced:
        return None
    if not forced.isdigit() or int(forced) < 1:
        raise ValueError(f"{SMOKE_ENV} must be a positive integer, got {forced!r}")
    return int(forced)


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's generators (all devices)."""
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002  (the global generator that notebook code uses)
    torch.manual_seed(seed)


def setup(presets: Mapping[str, Settings], seed: int = 0) -> tuple[Settings, torch.device]:
    """Pick the device, preset and CPU threads, seed everything, and say what was chosen.

    Args:
        presets: settings for ``"cpu"`` and ``"gpu"``.
        seed: the seed passed to :func:`seed_everything`.

    Returns:
        ``(settings, device)``: the chosen preset's settings and the device.
    """
    missing = [name for name in PRESETS if name not in presets]
    if missing:
        raise ValueError(f"presets must define {list(PRESETS)}; missing {missing}")
    device = choose_device()
    preset = choose_preset(device)
    torch.set_num_threads(choose_threads())
    seed_everything(seed)
    print(
        f"device: {device} | preset: {preset} | torch {torch.__version__} | "
        f"{torch.get_num_threads()} CPU threads | seed {seed}"
    )
    print(f"(set {PRESET_ENV}=cpu or =gpu to choose the preset yourself)")
    smoke = smoke_steps()
    if smoke is not None:
        print(f"SMOKE TEST: {SMOKE_ENV}={smoke} caps every training run; the numbers mean nothing")
    return presets[preset], device
