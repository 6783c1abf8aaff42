"""pytest plugin for CI's one execution of the notebooks (nbval): time, budgets, book cache.

Loaded by ``python3 tasks.py test`` as ``-p tests.notebook_ci`` beside
``--nbval-lax``. It

- times each notebook (kernel start and every cell), prints the times slowest
  first, and fails the run when a notebook, or the whole course, takes more
  than twice its budget (:data:`BUDGET_SECONDS`; the 2-core box is shared and
  noisy, so the margin is :data:`MARGIN`);
- with ``--notebook-cache DIR``, writes each notebook whose cells all passed,
  with the outputs of this execution, into the jupyter-cache at ``DIR`` (the
  book's ``_build/.jupyter_cache``) and tags the record with
  ``--notebook-run ID``. The book build (``execute_notebooks: cache``) then
  finds every notebook cached and executes none again, and
  ``tests/built_site/test_executions.py`` checks that the pages show this run.

The budgets are those of COURSE.md ("Budgets"), declared here once.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import nbformat
import pytest

# COURSE.md: every notebook under 2 minutes on the 2-core CPU box with the CPU preset,
# except at most three experiment notebooks under 5 minutes; the course under 15 minutes.
DEFAULT_BUDGET_SECONDS = 120
EXPERIMENT_BUDGET_SECONDS = 300
COURSE_BUDGET_SECONDS = 900
# The experiment notebooks allowed 5 minutes (at most three), by file name.
EXPERIMENT_NOTEBOOKS: frozenset[str] = frozenset(
    {"05_prope.ipynb", "06_placements.ipynb", "08_extension_experiment.ipynb"}
)
# COURSE.md: the real-model chapter's notebooks too, the model load included; its issue
# (#20) gives them 5 minutes each, beside the three experiment notebooks above.
REAL_MODEL_NOTEBOOKS: frozenset[str] = frozenset(
    {"09_real_model.ipynb", "09_ablations.ipynb", "09_beyond_context.ipynb"}
)
MARGIN = 2.0
RUN_KEY = "rope_lessons_run"
OUTPUTS_KEY = "notebook_ci_outputs"  # a cell's outputs on its report: [index, outputs]


def budget_seconds(notebook: str) -> int:
    """The budget of a notebook, by file name (before the margin)."""
    if Path(notebook).name in EXPERIMENT_NOTEBOOKS | REAL_MODEL_NOTEBOOKS:
        return EXPERIMENT_BUDGET_SECONDS
    return DEFAULT_BUDGET_SECONDS


@dataclass
class NotebookRun:
    """What one notebook's execution produced: time, pass/fail, the executed cells."""

    seconds: float = 0.0
    failed: bool = False
    outputs: dict[int, list[Any]] = field(default_factory=dict)  # cell index -> outputs


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("notebook_ci", "one execution of the notebooks per CI run")
    group.addoption(
        "--notebook-cache",
        default=None,
        help="write the executed notebooks into this jupyter-cache (the book's)",
    )
    group.addoption(
        "--notebook-run", default="", help="an identifier of this run, stored with each record"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(NotebookTimer(config), "notebook_ci_timer")


def _notebook_of(nodeid: str) -> str | None:
    path = nodeid.split("::", 1)[0]
    return path if path.endswith(".ipynb") else None


def _is_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker: the controller reports, times and caches."""
    return hasattr(config, "workerinput")


# Unit-test modules of a minute or more (tests/test_pretrained.py loads the real model
# once for the module): queued before the short ones, so that no worker is left with a
# long module at the end.
LONG_TEST_MODULES = (
    "tests/test_pretrained.py",
    "tests/test_sweeps.py",
    "tests/test_experiments.py",
)


def run_order(item: pytest.Item) -> tuple[int, int]:
    """Where an item goes in the queue of the pytest-xdist pool: the longest work first.

    The notebooks allowed five minutes, then the side checks (tests/side_checks.py:
    types, stored sweeps under another instruction set, GPU presets), then the other
    notebooks, then the long unit-test modules, then the rest, whose many short
    modules even out the two workers. pytest-xdist (``--dist loadscope``) hands a
    worker a whole module, class or notebook at a time: a notebook's cells share a
    kernel, so one worker runs them all, in order.
    """
    notebook = _notebook_of(item.nodeid)
    if notebook is not None:
        budget = budget_seconds(notebook)
        return (0 if budget > DEFAULT_BUDGET_SECONDS else 2, -budget)
    module = item.nodeid.split("::", 1)[0]
    if module == "tests/side_checks.py":
        return (1, 0)
    return (3, 0) if module in LONG_TEST_MODULES else (4, 0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=run_order)  # stable: each notebook's cells stay in order


class NotebookTimer:
    """Collects per-notebook times and outputs; reports and caches at the end.

    Under pytest-xdist, each worker attaches the outputs of the cells it ran to
    their reports (``user_properties``), and the controller, which receives every
    report, times, reports and caches; without xdist one process does both.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.runs: dict[str, NotebookRun] = defaultdict(NotebookRun)
        self.over_budget: list[str] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        if _notebook_of(item.nodeid) is None or call.when != "call":
            return
        notebook = getattr(item.parent, "nb", None)
        cell = getattr(item, "cell", None)
        outputs = getattr(item, "test_outputs", None)
        if notebook is not None and cell is not None and outputs is not None:
            index = next(i for i, c in enumerate(notebook.cells) if c is cell)
            # plain JSON data, which pytest-xdist can send to the controller
            plain = json.loads(json.dumps(list(outputs)))
            outcome.get_result().user_properties.append((OUTPUTS_KEY, [index, plain]))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        notebook = _notebook_of(report.nodeid)
        if notebook is None or _is_worker(self.config):
            return
        run = self.runs[notebook]
        run.seconds += report.duration
        if report.failed:
            run.failed = True
        for key, value in report.user_properties:
            if key == OUTPUTS_KEY:
                index, outputs = cast(tuple[int, list[Any]], value)
                run.outputs[index] = outputs

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.runs:
            return
        for name, run in self.runs.items():
            if run.seconds > MARGIN * budget_seconds(name):
                self.over_budget.append(name)
        total = sum(run.seconds for run in self.runs.values())
        if total > MARGIN * COURSE_BUDGET_SECONDS:
            self.over_budget.append("the whole course")
        if self.over_budget:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        cache_dir = self.config.getoption("--notebook-cache")
        if cache_dir:
            self.cache(Path(cache_dir), self.config.getoption("--notebook-run"))

    def cache(self, cache_dir: Path, run_id: str) -> None:
        """Store every fully passed notebook, with this run's outputs, in the book's cache."""
        from jupyter_cache import get_cache
        from jupyter_cache.base import CacheBundleIn

        cache = get_cache(str(cache_dir))
        root = Path(str(self.config.rootpath))
        for name, run in self.runs.items():
            if run.failed:
                continue
            executed = nbformat.read(root / name, as_version=4)  # as nbval read it
            count = 0
            for index, cell in enumerate(executed.cells):
                if cell.cell_type != "code":
                    continue
                count += 1
                cell.outputs = [nbformat.from_dict(o) for o in run.outputs.get(index, [])]
                cell.execution_count = count
                for output in cell.outputs:
                    if output.output_type == "execute_result":
                        output.execution_count = count
            nbformat.validate(executed)
            cache.cache_notebook_bundle(
                CacheBundleIn(
                    executed,
                    str((root / name).resolve()),
                    data={"execution_seconds": run.seconds, RUN_KEY: run_id},
                ),
                check_validity=False,
                overwrite=True,
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.runs:
            return
        write = terminalreporter.write_line
        terminalreporter.section("notebook wall times (kernel start and all cells)")
        for name, run in sorted(self.runs.items(), key=lambda item: -item[1].seconds):
            budget = budget_seconds(name)
            state = "OVER BUDGET" if name in self.over_budget else "ok"
            write(
                f"{run.seconds:7.1f} s  {name}  (budget {budget} s, fails above "
                f"{MARGIN * budget:.0f} s: {state}){'  FAILED' if run.failed else ''}"
            )
        total = sum(run.seconds for run in self.runs.values())
        write(
            f"{total:7.1f} s  all {len(self.runs)} notebooks  (course budget "
            f"{COURSE_BUDGET_SECONDS} s, fails above {MARGIN * COURSE_BUDGET_SECONDS:.0f} s)"
        )
        if self.over_budget:
            write(f"over budget: {', '.join(self.over_budget)}", red=True)
        if self.config.getoption("--notebook-cache"):
            cached = [name for name, run in self.runs.items() if not run.failed]
            write(f"cached {len(cached)} executed notebooks for the book build")
