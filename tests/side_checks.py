"""CI's checks beside the unit tests and nbval, as tests of the same pytest-xdist pool.

``python3 tasks.py test`` names this file on its pytest command line (its name
does not start with ``test_``, so a plain ``pytest tests`` leaves it out):

- the types (mypy, strict, as configured in ``pyproject.toml``);
- the prefixes of the stored sweeps under ``ATEN_CPU_CAPABILITY=default``, the
  instruction set least like any modern machine's (no vector extensions): the
  stored results must hold on any CPU, and the unit tests check them natively;
- the GPU preset of every notebook that runs code its CPU preset does not
  (:func:`gpu_only_paths`), executed on the CPU with every training loop cut
  to a few steps (``ROPE_LESSONS_SMOKE_STEPS``): a preset that breaks fails
  here, though no output is compared. A notebook whose GPU preset differs
  from its CPU preset only in counts and sizes (more seeds, longer windows,
  more samples) runs the same code in the nbval pass already.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from helpers import repository_module

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TASKS = repository_module("tasks", "tasks.py")  # its smoke scale and capability settings
SMOKE_STEPS: str = TASKS.SMOKE_STEPS
PRESETS_CALL = "settings, device = setup("


def _run(command: list[str], env: dict[str, str] | None = None) -> None:
    """Run ``command`` from the repository root; fail the test with its output if it fails."""
    done = subprocess.run(
        command, cwd=ROOT, env=os.environ | (env or {}), capture_output=True, text=True
    )
    if done.returncode:
        pytest.fail(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")


# One class per check: pytest-xdist (--dist loadscope) hands each to a worker as a whole.
class TestTypes:
    def test_mypy(self) -> None:
        _run([sys.executable, "-m", "mypy"])


class TestStoredSweeps:
    def test_prefixes_under_the_default_instruction_set(self) -> None:
        _run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                TASKS.STORED_SWEEP_TESTS,
                "-k",
                "test_the_prefix_of_every_stored_sweep_reproduces",
            ],
            env=TASKS.capability_env("default"),
        )


def notebook_presets(path: Path) -> dict[str, Any]:
    """The notebook's ``PRESETS``: its set-up code run up to the call of ``setup``."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and PRESETS_CALL in cell.source:
            namespace: dict[str, Any] = {}
            exec(cell.source.split(PRESETS_CALL, 1)[0], namespace)  # imports and PRESETS
            presets: dict[str, Any] = namespace["PRESETS"]
            return presets
    raise ValueError(f"{path.name} has no cell calling {PRESETS_CALL.strip()!r}")


def _kinds(value: Any) -> Any:
    """``value`` with every number replaced by one placeholder and every list by the
    set of its entries' kinds: what decides which code runs, not how much of it."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return "<number>"
    if isinstance(value, tuple) and not all(_kinds(v) == "<number>" for v in value):
        return tuple(_kinds(v) for v in value)  # a record such as (reading, length)
    if isinstance(value, (list, tuple, range, set, frozenset)):
        return frozenset(_kinds(v) for v in value)
    return repr(value)


def gpu_only_paths(presets: dict[str, Any]) -> list[str]:
    """The settings whose GPU value runs code that the CPU value does not.

    A setting runs no new code when both values are numbers (sizes, counts, step
    budgets), or lists whose GPU entries are, number for number, of kinds the CPU
    list has (more seeds; the same labelled readings at other lengths). A new
    label, a flag turned on, or ``None`` (train to the end) for a number is new.
    """
    cpu, gpu = presets["cpu"], presets["gpu"]
    new = []
    for name in sorted(set(cpu) | set(gpu)):
        if name not in cpu or name not in gpu:
            new.append(name)
            continue
        cpu_kinds, gpu_kinds = _kinds(cpu[name]), _kinds(gpu[name])
        if isinstance(cpu_kinds, frozenset) and isinstance(gpu_kinds, frozenset):
            if not gpu_kinds <= cpu_kinds:
                new.append(name)
        elif cpu_kinds != gpu_kinds:
            new.append(name)
    return new


def smoke_notebooks() -> list[Path]:
    """The notebooks whose GPU preset runs code that their CPU preset does not."""
    return [path for path in NOTEBOOKS if gpu_only_paths(notebook_presets(path))]


class TestGpuPresets:
    @pytest.mark.parametrize("path", smoke_notebooks(), ids=lambda path: path.name)
    def test_the_gpu_preset_runs(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from nbclient import NotebookClient

        # the kernel inherits these
        monkeypatch.setenv("ROPE_LESSONS_PRESET", "gpu")
        monkeypatch.setenv("ROPE_LESSONS_SMOKE_STEPS", SMOKE_STEPS)
        notebook = nbformat.read(path, as_version=4)
        client = NotebookClient(
            notebook,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": "notebooks"}},
        )
        client.execute()
