"""The CI plugin for the notebooks: budgets, times, and executions cached for the book."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import nbformat
import pytest
from jupyter_cache import get_cache
from notebook_ci import (
    DEFAULT_BUDGET_SECONDS,
    EXPERIMENT_BUDGET_SECONDS,
    EXPERIMENT_NOTEBOOKS,
    MARGIN,
    REAL_MODEL_NOTEBOOKS,
    RUN_KEY,
    NotebookRun,
    NotebookTimer,
)

ROOT = Path(__file__).resolve().parents[1]


def test_at_most_three_experiment_notebooks_get_the_longer_budget() -> None:
    assert len(EXPERIMENT_NOTEBOOKS) <= 3
    for name in EXPERIMENT_NOTEBOOKS:
        assert (ROOT / "notebooks" / name).is_file(), name


def test_the_real_model_notebooks_get_five_minutes_with_the_load() -> None:
    from notebook_ci import budget_seconds

    for name in REAL_MODEL_NOTEBOOKS:
        assert (ROOT / "notebooks" / name).is_file(), name
        assert budget_seconds(f"notebooks/{name}") == EXPERIMENT_BUDGET_SECONDS


def timer_with(seconds: dict[str, float]) -> tuple[NotebookTimer, pytest.Session]:
    # duck-typed stand-ins: only getoption and exitstatus are used
    config = SimpleNamespace(getoption=lambda name: None)
    timer = NotebookTimer(cast(pytest.Config, config))
    for name, value in seconds.items():
        timer.runs[name] = NotebookRun(seconds=value)
    return timer, cast(pytest.Session, SimpleNamespace(exitstatus=pytest.ExitCode.OK))


def test_a_notebook_over_twice_its_budget_fails_the_run() -> None:
    limit = MARGIN * DEFAULT_BUDGET_SECONDS
    timer, session = timer_with({"notebooks/a.ipynb": limit - 1, "notebooks/b.ipynb": 10.0})
    timer.pytest_sessionfinish(session)
    assert session.exitstatus == pytest.ExitCode.OK and timer.over_budget == []
    timer, session = timer_with({"notebooks/a.ipynb": limit + 1, "notebooks/b.ipynb": 10.0})
    timer.pytest_sessionfinish(session)
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert timer.over_budget == ["notebooks/a.ipynb"]


def _tiny_notebook(path: Path, answer: int) -> None:
    """A notebook with a fresh random line (not in the file) and one checked output
    that needs the state of the cell before it."""
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# A notebook"),
            nbformat.v4.new_code_cell(
                f"import uuid\nanswer = {answer}\nprint('fresh', uuid.uuid4().hex)"
            ),
            # needs the kernel of the cell above: the cells of a notebook share one worker
            nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(answer)"),
        ]
    )
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.cells[2].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"{answer}\n")
    ]
    notebook.cells[2].execution_count = 1
    nbformat.write(notebook, path)


def _check_cached(cache_dir: Path, path: Path, answer: int) -> None:
    record = get_cache(str(cache_dir)).match_cache_notebook(nbformat.read(path, as_version=4))
    assert record.data[RUN_KEY] == "run-42"
    executed = get_cache(str(cache_dir)).get_cache_bundle(record.pk).nb
    printed = executed.cells[0].outputs[0].text  # the markdown cell is not cached
    assert printed.startswith("fresh ") and printed not in str(nbformat.read(path, 4))
    assert executed.cells[1].outputs[0].text == f"{answer}\n"


@pytest.mark.parametrize("workers", [None, 2])
def test_nbval_run_times_the_notebook_and_caches_its_execution_for_the_book(
    tmp_path: Path, workers: int | None
) -> None:
    """One execution: the cache then holds the outputs of that run, matched by the
    notebook file as the book build matches it, and tagged with the run id; the same
    on two pytest-xdist workers, where the controller caches what the workers ran."""
    paths = [tmp_path / "tiny.ipynb", tmp_path / "other.ipynb"]
    for answer, path in enumerate(paths, start=42):
        _tiny_notebook(path, answer)
    cache_dir = tmp_path / "cache"
    pool = [] if workers is None else [f"--numprocesses={workers}", "--dist=loadscope"]
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "tests.notebook_ci",
        "-p",
        "no:cacheprovider",
        "--nbval-lax",
        "--nbval-current-env",
        f"--notebook-cache={cache_dir}",
        "--notebook-run=run-42",
        *pool,
        *(str(path) for path in paths),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "notebook wall times" in done.stdout
    assert "tiny.ipynb" in done.stdout and "other.ipynb" in done.stdout
    assert "cached 2 executed notebooks" in done.stdout
    for answer, path in enumerate(paths, start=42):
        _check_cached(cache_dir, path, answer)


def test_a_gpu_preset_runs_new_code_only_with_new_labels_flags_or_full_training() -> None:
    from side_checks import gpu_only_paths

    def new(cpu: object, gpu: object) -> bool:
        return gpu_only_paths({"cpu": {"x": cpu}, "gpu": {"x": gpu}}) == ["x"]

    # counts, sizes and seeds: the same code, more of it
    assert not new(150, 600) and not new(0.02, 0.05)
    assert not new([0, 1, 2], list(range(10))) and not new((128, 1024), (128, 512, 2048))
    assert not new([("plain", 4096), ("yarn", 2048)], [("yarn", 8192)])
    assert not new(["qk"], ["qk"])
    # new readings, a flag turned on, training to the end, a setting only one preset has
    assert new(["qk", "vo"], ["qk", "vo", "qkvo"])
    assert new([("plain", 4096, 0)], [("yarn", 12288, 0)])
    assert new(False, True) and new(320, None)
    assert gpu_only_paths({"cpu": {}, "gpu": {"extra": 1}}) == ["extra"]


def test_the_smoke_pass_covers_the_notebooks_with_gpu_only_code() -> None:
    """Read from each notebook's own PRESETS: which notebooks the CI smoke pass runs."""
    from side_checks import NOTEBOOKS, notebook_presets, smoke_notebooks

    assert len(NOTEBOOKS) >= 18
    smoked = {path.name for path in smoke_notebooks()}
    assert {"05_prope.ipynb", "06_placements.ipynb", "08_extension_experiment.ipynb"} <= smoked
    # seeds only: nbval runs the same code
    assert "01_no_order.ipynb" not in smoked
    for path in NOTEBOOKS:
        presets = notebook_presets(path)
        assert set(presets) == {"cpu", "gpu"}, path.name
