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


def test_nbval_run_times_the_notebook_and_caches_its_execution_for_the_book(
    tmp_path: Path,
) -> None:
    """One execution: the cache then holds the outputs of that run, matched by the
    notebook file as the book build matches it, and tagged with the run id."""
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# A notebook"),
            nbformat.v4.new_code_cell("import uuid\nprint('fresh', uuid.uuid4().hex)"),
            nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(6 * 7)"),
        ]
    )
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    notebook.cells[2].execution_count = 1
    path = tmp_path / "tiny.ipynb"
    nbformat.write(notebook, path)
    cache_dir = tmp_path / "cache"
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
        str(path),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "notebook wall times" in done.stdout and "tiny.ipynb" in done.stdout
    record = get_cache(str(cache_dir)).match_cache_notebook(nbformat.read(path, as_version=4))
    assert record.data[RUN_KEY] == "run-42"
    executed = get_cache(str(cache_dir)).get_cache_bundle(record.pk).nb
    printed = executed.cells[0].outputs[0].text  # the markdown cell is not cached
    assert printed.startswith("fresh ") and printed not in str(nbformat.read(path, 4))
    assert executed.cells[1].outputs[0].text == "42\n"
