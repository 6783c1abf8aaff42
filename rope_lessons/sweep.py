"""Stored sweeps: multi-seed experiments trained by a script, stored as package data, verified.

A notebook that cannot afford all its seeds trains one live and loads the
rest from a results file that this module wrote. A sweep is a module
``rope_lessons/sweeps/<name>.py`` that defines ``SWEEP = Sweep(...)``: a name,
a version, a description, the runs (:class:`~rope_lessons.experiments.Run`)
and the seeds. Modules in that package are discovered automatically.

Command line (from the repository root)::

    python -m rope_lessons.sweep --list
    python -m rope_lessons.sweep ch03_order [--seeds 0 1 2] [--device cpu] [--restart]

trains every (run, seed) not yet stored, with a progress bar, and writes each
finished run at once to ``rope_lessons/results/<name>.json``, so an
interrupted sweep resumes where it stopped. Each result records the command,
device, CPU threads, library versions, date and git commit; the file records
the sweep's version and the configuration of every run, and a SHA-256 of its
content.

:func:`load_sweep` reads a results file and refuses it when the hash does not
match (a hand-edited file), when its version differs from the code's, or when
the code now describes a run differently (a change of meaning without a
version bump). Every results file also holds a *reference*: the cheapest
(run, seed) trained on the CPU with one thread, which ``tests/test_sweeps.py``
trains again from today's code and compares (see :data:`REPRODUCTION_TOLERANCE`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import importlib
import json
import os
import pkgutil
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from rope_lessons.experiments import Run, RunResult, run_once
from rope_lessons.runtime import check_device, choose_threads

FORMAT = 1
SWEEPS_PACKAGE = "rope_lessons.sweeps"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
# The reproduction test re-trains the reference run and accepts every training loss
# and held-out metric within this absolute difference of the stored one. On the same
# CPU and library versions the numbers agree exactly; 2e-3 allows two flipped
# predictions in 1024 from floating-point differences between CPUs.
REPRODUCTION_TOLERANCE = 2e-3
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Sweep:
    """A named, versioned experiment: every run trained with every seed.

    Attributes:
        name: the module name in :mod:`rope_lessons.sweeps`, e.g. ``"ch03_order"``.
        version: bump it whenever a run changes meaning (stored results of
            another version are refused).
        description: one or two sentences: what it measures and for which chapter.
        runs: the variants, with unique labels.
        seeds: the seeds every run is trained with.
    """

    name: str
    version: int
    description: str
    runs: tuple[Run, ...]
    seeds: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"name must be a lower-case identifier, got {self.name!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"version must be an int >= 1, got {self.version!r}")
        if not isinstance(self.runs, tuple) or not self.runs:
            raise TypeError("runs must be a non-empty tuple of Run")
        for run in self.runs:
            if not isinstance(run, Run):
                raise TypeError(f"runs must hold Run objects, got {type(run).__name__}")
        labels = [run.label for run in self.runs]
        if len(set(labels)) != len(labels):
            raise ValueError(f"run labels must be unique within a sweep, got {labels}")
        if not isinstance(self.seeds, tuple) or not self.seeds:
            raise TypeError("seeds must be a non-empty tuple of ints")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct, got {self.seeds}")

    @property
    def labels(self) -> list[str]:
        """The run labels, in order."""
        return [run.label for run in self.runs]

    def run(self, label: str) -> Run:
        """The run with this label."""
        for run in self.runs:
            if run.label == label:
                return run
        raise ValueError(f"sweep {self.name!r} has no run labelled {label!r}; it has {self.labels}")

    def reference(self) -> tuple[Run, int]:
        """The cheapest run (see :attr:`Run.cost`) with the lowest seed: what the test re-trains."""
        return min(self.runs, key=lambda run: run.cost), min(self.seeds)

    def config(self) -> dict[str, Any]:
        """The configuration of every run, as stored (JSON values)."""
        described = {run.label: run.describe() for run in self.runs}
        loaded: dict[str, Any] = json.loads(json.dumps(described))
        return loaded


def largest_difference(first: RunResult, second: RunResult) -> float:
    """The largest absolute difference between two results of the same (run, seed): over
    every training loss, held-out metric, validation-curve point and ``extra`` number.

    Raises:
        ValueError: if they are not results of the same run and seed, or do not
            hold the same entries.
    """
    if (first.label, first.seed) != (second.label, second.seed):
        raise ValueError(
            f"results of different runs: {first.label!r} seed {first.seed} vs "
            f"{second.label!r} seed {second.seed}"
        )

    def numbers(result: RunResult) -> dict[str, float | None]:
        values: dict[str, float | None] = {
            f"loss {i}": loss for i, loss in enumerate(result.losses)
        }
        for table in ("metrics", "curve"):
            for key, metrics in getattr(result, table).items():
                for name, value in dataclasses.asdict(metrics).items():
                    values[f"{table}[{key}].{name}"] = value
        values.update({f"extra {key}": value for key, value in result.extra.items()})
        return values

    ours, theirs = numbers(first), numbers(second)
    if ours.keys() != theirs.keys() or any(
        (ours[key] is None) != (theirs[key] is None) for key in ours
    ):
        raise ValueError(f"{first.label!r} seed {first.seed}: the results hold different entries")
    gaps = [
        abs(a - b)
        for key in ours
        if (a := ours[key]) is not None and (b := theirs[key]) is not None
    ]
    return max(gaps, default=0.0)


def available() -> list[str]:
    """Names of the sweeps defined in :mod:`rope_lessons.sweeps`."""
    package = importlib.import_module(SWEEPS_PACKAGE)
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg)


def get_sweep(name: str) -> Sweep:
    """The sweep defined by ``rope_lessons/sweeps/<name>.py``.

    Raises:
        ValueError: if there is no such sweep, or its module does not define
            ``SWEEP`` as a :class:`Sweep` of that name.
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


@dataclass(frozen=True)
class StoredSweep:
    """A verified results file.

    Attributes:
        sweep: the sweep as the code defines it today.
        stored: every stored result.
        records: per result (same order), how it was made: command, device,
            threads, library versions, date, git commit.
        reference: the cheapest (run, seed) trained on the CPU with one
            thread, the one the reproduction test trains again.
        path: where the file was read from.
    """

    sweep: Sweep
    stored: tuple[RunResult, ...]
    records: tuple[dict[str, Any], ...]
    reference: RunResult
    path: str

    def results(self, label: str) -> list[RunResult]:
        """The stored results of one run, ordered by seed."""
        self.sweep.run(label)  # refuses an unknown label
        return sorted((r for r in self.stored if r.label == label), key=lambda r: r.seed)

    def result(self, label: str, seed: int) -> RunResult:
        """The stored result of one run and seed."""
        for r in self.results(label):
            if r.seed == seed:
                return r
        raise ValueError(f"sweep {self.sweep.name!r} has no stored {label!r} with seed {seed}")

    @property
    def complete(self) -> bool:
        """Whether every run is stored for every seed of the sweep."""
        done = {(r.label, r.seed) for r in self.stored}
        return all((label, s) in done for label in self.sweep.labels for s in self.sweep.seeds)

    def describe(self) -> str:
        """A few lines: what, how many seeds, on which device, when, from which commit."""
        devices = sorted({r["device"] for r in self.records})
        dates = sorted(r["date"][:10] for r in self.records)
        commits = sorted({str(r["git_commit"])[:10] for r in self.records})
        seeds = sorted({r.seed for r in self.stored})
        return (
            f"stored sweep {self.sweep.name} v{self.sweep.version}: {len(self.stored)} runs "
            f"({len(self.sweep.runs)} variants x seeds {seeds}); device {', '.join(devices)}; "
            f"{dates[0]} to {dates[-1]}; commit {', '.join(commits)}"
        )


def content_hash(content: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``content`` without its own ``sha256`` entry."""
    body = {key: value for key, value in content.items() if key != "sha256"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def results_path(name: str, results_dir: Path | None = None) -> Path:
    """Where a sweep's results file is written (the package's ``results`` folder by default)."""
    return (RESULTS_DIR if results_dir is None else Path(results_dir)) / f"{name}.json"


def _read(sweep: Sweep, results_dir: Path | None) -> tuple[dict[str, Any], str] | None:
    """The verified content of the sweep's results file and its location, or None if absent."""
    if results_dir is None:
        packaged = resources.files("rope_lessons").joinpath(f"results/{sweep.name}.json")
        if not packaged.is_file():
            return None
        text, where = packaged.read_text(encoding="utf-8"), str(packaged)
    else:
        path = results_path(sweep.name, results_dir)
        if not path.is_file():
            return None
        text, where = path.read_text(encoding="utf-8"), str(path)
    content: dict[str, Any] = json.loads(text)
    if content.get("format") != FORMAT:
        raise ValueError(f"{where}: unknown format {content.get('format')!r} (expected {FORMAT})")
    if content.get("sha256") != content_hash(content):
        raise ValueError(
            f"{where}: the content does not match its SHA-256: the file was edited by hand or "
            f"damaged. Never edit results; re-run `python -m rope_lessons.sweep {sweep.name}`."
        )
    if content["name"] != sweep.name:
        raise ValueError(f"{where} holds sweep {content['name']!r}, not {sweep.name!r}")
    if content["version"] != sweep.version:
        raise ValueError(
            f"{where} was made by version {content['version']} of sweep {sweep.name!r}, the code "
            f"is version {sweep.version}: re-run `python -m rope_lessons.sweep {sweep.name} "
            "--restart`."
        )
    if content["config"] != sweep.config():
        changed = sorted(
            label
            for label in set(content["config"]) | set(sweep.config())
            if content["config"].get(label) != sweep.config().get(label)
        )
        raise ValueError(
            f"{where}: the code now defines runs {changed} differently from the stored ones, "
            f"at the same version {sweep.version}. Bump Sweep.version and re-run the sweep."
        )
    return content, where


def load_sweep(sweep: str | Sweep, results_dir: Path | None = None) -> StoredSweep:
    """Read and verify a sweep's stored results.

    Args:
        sweep: a sweep name (see :func:`available`) or a :class:`Sweep`.
        results_dir: a folder to read from instead of the installed package's.

    Raises:
        ValueError: if there are no results, the file was edited (hash), or it
            was made by another version or another configuration of the sweep.
    """
    definition = get_sweep(sweep) if isinstance(sweep, str) else sweep
    found = _read(definition, results_dir)
    if found is None or found[0]["reference"] is None:
        raise ValueError(
            f"no stored results for sweep {definition.name!r}: run "
            f"`python -m rope_lessons.sweep {definition.name}`"
        )
    content, where = found
    return StoredSweep(
        sweep=definition,
        stored=tuple(RunResult.from_json(entry["result"]) for entry in content["results"]),
        records=tuple(entry["record"] for entry in content["results"]),
        reference=RunResult.from_json(content["reference"]["result"]),
        path=where,
    )


def git_commit() -> str | None:
    """The checked-out commit of the package's repository, or None outside a git checkout.

    ``+dirty`` is appended when the package's code (``rope_lessons/`` except its
    results) differs from the commit, untracked files included.
    """
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            # Only the package's code decides the results: results files being written
            # and edits outside rope_lessons/ (notebooks, tests) do not make it dirty.
            ["git", "status", "--porcelain", "--", "rope_lessons", ":!rope_lessons/results"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if status else "")


def record(device: torch.device, command: str) -> dict[str, Any]:
    """How a result was made: command, device, threads, versions, date, commit."""
    return {
        "command": command,
        "device": str(device),
        "device_name": (
            torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else platform.processor() or platform.machine()
        ),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
    }


def _write(path: Path, content: dict[str, Any]) -> None:
    """Write the file with its hash, atomically (a crash never leaves half a file)."""
    content["sha256"] = content_hash(content)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(content, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def run_sweep(
    sweep: Sweep,
    *,
    seeds: Sequence[int] | None = None,
    device: torch.device | str = "cpu",
    results_dir: Path | None = None,
    restart: bool = False,
    progress: bool = True,
    command: str | None = None,
) -> Path:
    """Train every (run, seed) of ``sweep`` that is not stored yet, storing each at once.

    Args:
        sweep: what to train.
        seeds: a subset of ``sweep.seeds`` to train now (default: all).
        device: where to train; on a CUDA device the reference run is also
            trained on the CPU, so that the reproduction test can check it.
        results_dir: where to write (default: the package's results folder).
        restart: discard stored results of another version or configuration
            (otherwise they are an error).
        progress: progress bars on standard error.
        command: the command line to record (default: this process's).

    Returns:
        The path of the results file.
    """
    device = check_device(device)
    chosen = tuple(sweep.seeds if seeds is None else seeds)
    unknown = sorted(set(chosen) - set(sweep.seeds))
    if unknown:
        raise ValueError(f"seeds {unknown} are not seeds of sweep {sweep.name!r}: {sweep.seeds}")
    command = command or " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
    path = results_path(sweep.name, results_dir)
    try:
        found = None if restart else _read(sweep, path.parent)
    except ValueError as error:
        raise ValueError(f"{error} (or pass restart=True / --restart to start over)") from None
    content: dict[str, Any] = (
        found[0]
        if found
        else {
            "format": FORMAT,
            "name": sweep.name,
            "version": sweep.version,
            "description": sweep.description,
            "config": sweep.config(),
            "seeds": list(sweep.seeds),
            "results": [],
            "reference": None,
        }
    )
    done = {(e["result"]["label"], e["result"]["seed"]) for e in content["results"]}
    pending = [(run, s) for s in chosen for run in sweep.runs if (run.label, s) not in done]
    bar = tqdm(pending, desc=sweep.name, disable=not progress, file=sys.stderr, unit="run")
    for run, seed in bar:
        bar.set_postfix_str(f"{run.label}, seed {seed}")
        result = run_once(run, seed, device, progress=False)
        content["results"].append({"result": result.to_json(), "record": record(device, command)})
        content["reference"] = content["reference"] or _stored_reference(sweep, content)
        _write(path, content)
    if content["reference"] is None:
        content["reference"] = _cpu_reference(sweep, command)
        _write(path, content)
    return path


def _stored_reference(sweep: Sweep, content: dict[str, Any]) -> dict[str, Any] | None:
    """The stored entry of the reference (run, seed), if it was trained on the CPU on one thread."""
    run, seed = sweep.reference()
    for entry in content["results"]:
        same_run = (entry["result"]["label"], entry["result"]["seed"]) == (run.label, seed)
        if same_run and entry["record"]["device"] == "cpu" and entry["record"]["threads"] == 1:
            found: dict[str, Any] = entry
            return found
    return None


def _cpu_reference(sweep: Sweep, command: str) -> dict[str, Any]:
    """Train the reference (run, seed) on the CPU with one thread."""
    run, seed = sweep.reference()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = run_once(run, seed, "cpu", progress=False)
        return {"result": result.to_json(), "record": record(torch.device("cpu"), command)}
    finally:
        torch.set_num_threads(threads)


def main(argv: Sequence[str] | None = None) -> None:
    """The command line: ``python -m rope_lessons.sweep NAME`` (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m rope_lessons.sweep",
        description="Train a stored sweep and write its results (resumes where it stopped).",
    )
    parser.add_argument("name", nargs="?", help="the sweep to run (see --list)")
    parser.add_argument("--list", action="store_true", help="list the sweeps and their state")
    parser.add_argument("--seeds", type=int, nargs="+", help="train only these of its seeds")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    parser.add_argument(
        "--restart", action="store_true", help="discard stored results of another version"
    )
    args = parser.parse_args(argv)
    if args.list:
        for name in available():
            sweep = get_sweep(name)
            try:
                state = load_sweep(sweep).describe()
            except ValueError as error:
                state = f"not usable: {error}"
            print(f"{name} (v{sweep.version}): {sweep.description}\n    {state}")
        return
    if args.name is None:
        parser.error("name a sweep, or pass --list")
    try:
        sweep = get_sweep(args.name)
        torch.set_num_threads(choose_threads())
        given = sys.argv[1:] if argv is None else list(argv)
        command = " ".join(["python -m rope_lessons.sweep", *map(shlex.quote, given)])
        path = run_sweep(
            sweep, seeds=args.seeds, device=args.device, restart=args.restart, command=command
        )
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    print(f"wrote {path}")
    print(load_sweep(sweep, path.parent).describe())


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy, so that the Sweep class of
    # rope_lessons.sweeps modules and of main() is the same class.
    from rope_lessons import sweep as _sweep

    _sweep.main()
