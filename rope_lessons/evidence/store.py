"""The results files of stored sweeps: written as runs finish, verified when read.

:func:`run_sweep` trains every (run, seed) of a sweep not yet stored, with a
progress bar, and writes each finished run at once to
``rope_lessons/results/<name>.json``, so an interrupted sweep resumes where it
stopped. Each result records the command, device, CPU threads, library
versions, date and git commit; the file records the sweep's version and the
configuration of every run, and a SHA-256 of its content. A ``results_dir``
writes and reads another folder instead, so that two processes can train
different seeds at once; :func:`merge_results` then adds the runs one of them
stored to the other's file. :func:`dry_run` prints what is pending and an
estimated time (:func:`measure_throughput`).

:func:`read_results` (and :func:`load_stored`, which builds the
:class:`~rope_lessons.evidence.reproduction.StoredSweep`) refuses a file whose
hash does not match (a hand-edited file), whose version differs from the
code's, or whose runs the code now describes differently (a change of meaning
without a version bump). A stored configuration keeps the qualified names it
was written with; :func:`current_names` maps those of modules that moved since
(:data:`MOVED_MODULES`) before the comparison.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from rope_lessons.evidence.reproduction import StoredSweep
from rope_lessons.evidence.runs import (
    EVAL_BATCH_SIZE,
    Run,
    RunResult,
    run_once,
)
from rope_lessons.evidence.runtime import check_device
from rope_lessons.evidence.sweep import Sweep, same_config

FORMAT = 3
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
# Where the modules that stored configurations name (data types, analyses) live now. A
# results file keeps the qualified names it was written with, which its hash covers;
# reading it maps the old names to these before comparing with the code's description.
MOVED_MODULES = {
    "rope_lessons.corpus": "rope_lessons.toy.corpus",
    "rope_lessons.synthetic": "rope_lessons.toy.synthetic",
    "rope_lessons.long_context": "rope_lessons.chapters.long_context",
    "rope_lessons.decay": "rope_lessons.chapters.decay",
    "rope_lessons.vo_rope": "rope_lessons.chapters.vo_rope",
}


def content_hash(content: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``content`` without its own ``sha256`` entry."""
    body = {key: value for key, value in content.items() if key != "sha256"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def results_path(name: str, results_dir: Path | None = None) -> Path:
    """Where a sweep's results file is written (the package's ``results`` folder by default)."""
    return (RESULTS_DIR if results_dir is None else Path(results_dir)) / f"{name}.json"


def current_names(value: Any) -> Any:
    """``value`` (a stored configuration, JSON values) with every qualified name of a
    module in :data:`MOVED_MODULES` rewritten to the module's present place."""
    if isinstance(value, dict):
        return {key: current_names(item) for key, item in value.items()}
    if isinstance(value, list):
        return [current_names(item) for item in value]
    if isinstance(value, str):
        for old, new in MOVED_MODULES.items():
            if value.startswith(old + "."):
                return new + value[len(old) :]
    return value


def read_results(sweep: Sweep, results_dir: Path | None) -> tuple[dict[str, Any], str] | None:
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
            f"damaged. Never edit results; re-run `python -m rope_lessons.sweeps {sweep.name}`."
        )
    if content["name"] != sweep.name:
        raise ValueError(f"{where} holds sweep {content['name']!r}, not {sweep.name!r}")
    if content["version"] != sweep.version:
        raise ValueError(
            f"{where} was made by version {content['version']} of sweep {sweep.name!r}, the code "
            f"is version {sweep.version}: re-run `python -m rope_lessons.sweeps {sweep.name} "
            "--restart`."
        )
    stored_config = current_names(content["config"])
    if not same_config(stored_config, sweep.config()):
        changed = sorted(
            label
            for label in set(content["config"]) | set(sweep.config())
            if not same_config(stored_config.get(label), sweep.config().get(label))
        )
        raise ValueError(
            f"{where}: the code now defines runs {changed} differently from the stored ones, "
            f"at the same version {sweep.version}. Bump Sweep.version and re-run the sweep."
        )
    return content, where


def git_commit() -> str | None:
    """The checked-out commit of the package's repository, or None outside a git checkout.

    ``+dirty`` is appended when the package's code (``rope_lessons/`` except its
    results) differs from the commit, untracked files included.
    """
    root = Path(__file__).resolve().parents[2]
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


def processor_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def record(device: torch.device, command: str) -> dict[str, Any]:
    """How a result was made: command, device, processor and its vector instruction set
    (the one PyTorch's CPU kernels use), threads, versions, date, commit."""
    return {
        "command": command,
        "device": str(device),
        "device_name": (
            torch.cuda.get_device_name(device) if device.type == "cuda" else processor_name()
        ),
        "processor": processor_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "system": platform.system(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
    }


def write_results(path: Path, content: dict[str, Any]) -> None:
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
    labels: Sequence[str] | None = None,
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
        labels: train only these variants (default: all); an unknown label is an error.

    Returns:
        The path of the results file.
    """
    device = check_device(device)
    chosen = _chosen_seeds(sweep, seeds)
    command = command or f"python -m rope_lessons.sweeps {sweep.name}"
    path = results_path(sweep.name, results_dir)
    found = _read_for_writing(sweep, path.parent, restart)
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
    pending = _pending(sweep, chosen, content["results"])
    if labels is not None:
        wanted = {sweep.run(label).label for label in labels}  # refuses an unknown label
        pending = [(run, s) for run, s in pending if run.label in wanted]
    # The bar counts tokens (Run.cost), so that its estimate of the time left weighs
    # long runs as long.
    bar = tqdm(
        total=sum(run.cost for run, _ in pending),
        desc=f"{sweep.name}: {len(pending)} runs",
        disable=not progress,
        file=sys.stderr,
        unit="tok",
        unit_scale=True,
    )
    for run, seed in pending:
        bar.set_postfix_str(f"{run.label}, seed {seed}")
        result = run_once(run, seed, device, progress=False)
        content["results"].append({"result": result.to_json(), "record": record(device, command)})
        content["reference"] = content["reference"] or _stored_reference(sweep, content)
        write_results(path, content)
        bar.update(run.cost)
    bar.close()
    if content["reference"] is None:
        content["reference"] = _cpu_reference(sweep, command)
        write_results(path, content)
    return path


def merge_results(sweep: Sweep, source_dir: Path, results_dir: Path | None = None) -> Path:
    """Add to the sweep's results the (run, seed) pairs stored in ``source_dir`` but not yet
    here: e.g. seeds trained in parallel by another process (``--seeds ... --results-dir``).

    Both files are verified first (hash, version, configuration), each merged entry keeps
    its own record (command, machine, date), and a pair stored in both is kept as it is
    here. With nothing stored here yet, the source is copied.

    Returns:
        The path of the results file written.

    Raises:
        ValueError: if ``source_dir`` holds no results of the sweep, or either file fails
            its verification.
    """
    found = read_results(sweep, Path(source_dir))
    if found is None:
        raise ValueError(f"{source_dir} holds no results of sweep {sweep.name!r}")
    source = found[0]
    path = results_path(sweep.name, results_dir)
    here = read_results(sweep, path.parent)
    content: dict[str, Any] = here[0] if here else {**source, "results": [], "reference": None}
    done = {(e["result"]["label"], e["result"]["seed"]) for e in content["results"]}
    for entry in source["results"]:
        if (entry["result"]["label"], entry["result"]["seed"]) not in done:
            content["results"].append(entry)
    content["reference"] = (
        content["reference"] or _stored_reference(sweep, content) or source["reference"]
    )
    write_results(path, content)
    return path


def _read_for_writing(
    sweep: Sweep, results_dir: Path, restart: bool
) -> tuple[dict[str, Any], str] | None:
    """The stored results that a run of the sweep adds to, or None to start afresh."""
    try:
        return None if restart else read_results(sweep, results_dir)
    except ValueError as error:
        raise ValueError(f"{error} (or pass restart=True / --restart to start over)") from None


def _chosen_seeds(sweep: Sweep, seeds: Sequence[int] | None) -> tuple[int, ...]:
    chosen = tuple(sweep.seeds if seeds is None else seeds)
    unknown = sorted(set(chosen) - set(sweep.seeds))
    if unknown:
        raise ValueError(f"seeds {unknown} are not seeds of sweep {sweep.name!r}: {sweep.seeds}")
    return chosen


def _pending(
    sweep: Sweep, seeds: Sequence[int], stored: Sequence[dict[str, Any]]
) -> list[tuple[Run[Any], int]]:
    done = {(e["result"]["label"], e["result"]["seed"]) for e in stored}
    return [(run, s) for s in seeds for run in sweep.runs if (run.label, s) not in done]


def pending_runs(
    sweep: Sweep,
    *,
    seeds: Sequence[int] | None = None,
    results_dir: Path | None = None,
    restart: bool = False,
) -> list[tuple[Run[Any], int]]:
    """The (run, seed) pairs that :func:`run_sweep` with these arguments would train, in order."""
    chosen = _chosen_seeds(sweep, seeds)
    found = _read_for_writing(sweep, results_path(sweep.name, results_dir).parent, restart)
    return _pending(sweep, chosen, found[0]["results"] if found else [])


# Steps trained to measure a machine's throughput for --dry-run, after a warm-up run.
TIMING_STEPS = 25


def measure_throughput(
    sweep: Sweep, device: torch.device | str = "cpu", steps: int = TIMING_STEPS
) -> float:
    """Cost units (:attr:`~rope_lessons.evidence.runs.Run.cost`: tokens, a training token
    counting three, an evaluated one one) per second of the sweep's cheapest run on ``device``.

    Times its first ``steps`` training steps and one evaluation, after an untimed
    warm-up run of a few steps (caches, kernels, the first allocations), so that only
    building the model remains as overhead and the estimate errs a little slow.
    """
    run, seed = sweep.reference()
    steps = min(steps, run.steps)
    run_once(run, seed, device, progress=False, stop_after=min(3, steps), checkpoints=False)
    started = time.perf_counter()
    run_once(run, seed, device, progress=False, stop_after=steps, checkpoints=False)
    seconds = time.perf_counter() - started
    evaluated = sum(run.eval_lens) * EVAL_BATCH_SIZE * run.eval_batches
    return (3 * steps * run.batch_size * run.train_len + evaluated) / seconds


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def dry_run(
    sweep: Sweep,
    *,
    seeds: Sequence[int] | None = None,
    device: torch.device | str = "cpu",
    results_dir: Path | None = None,
    restart: bool = False,
    throughput: float | None = None,
) -> str:
    """What :func:`run_sweep` would train, and an estimate of how long it would take.

    The runs with their cost, the seeds, the pending (run, seed) count and an
    estimated time: their total :attr:`~rope_lessons.evidence.runs.Run.cost` divided by
    ``throughput``
    (cost units per second), measured with :func:`measure_throughput` on
    ``device`` when not given. Nothing is written.
    """
    device = check_device(device)
    chosen = _chosen_seeds(sweep, seeds)
    pending = pending_runs(sweep, seeds=chosen, results_dir=results_dir, restart=restart)
    lines = [f"{sweep.name} (v{sweep.version}): {sweep.description}", "runs (cost in tokens):"]
    lines += [f"    {run.label}: {run.cost:,}" for run in sweep.runs]
    lines.append(f"seeds: {' '.join(map(str, chosen))}")
    total = sum(run.cost for run, _ in pending)
    lines.append(
        f"pending: {len(pending)} of {len(sweep.runs) * len(chosen)} (run, seed) pairs, "
        f"{total:,} tokens"
    )
    if pending:
        if throughput is None:
            throughput = measure_throughput(sweep, device)
            source = (
                f"measured on {device} with {torch.get_num_threads()} thread(s): "
                f"{min(TIMING_STEPS, sweep.reference()[0].steps)} steps and one evaluation "
                f"of {sweep.reference()[0].label!r}"
            )
        else:
            throughput = float(throughput)
            source = "stated"
        if not (math.isfinite(throughput) and throughput > 0):
            raise ValueError(f"throughput must be a finite number > 0, got {throughput}")
        lines.append(
            f"estimated time: about {_duration(total / throughput)} "
            f"(an estimate, from {throughput:,.0f} tokens/s, {source})"
        )
    return "\n".join(lines)


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


def without_paths(arguments: Sequence[str]) -> list[str]:
    """The command-line arguments as recorded: a folder given to ``--results-dir`` or
    ``--merge-from`` is written ``DIR``, so that no record holds a path of the machine.

    >>> without_paths(["ch03_order", "--seeds", "1", "--results-dir", "/tmp/x"])
    ['ch03_order', '--seeds', '1', '--results-dir', 'DIR']
    """
    recorded: list[str] = []
    for argument in arguments:
        folder = recorded[-1:] in (["--results-dir"], ["--merge-from"])
        if argument.startswith(("--results-dir=", "--merge-from=")):
            argument = argument.split("=", 1)[0] + "=DIR"
        recorded.append("DIR" if folder else argument)
    return recorded


def load_stored(sweep: Sweep, results_dir: Path | None = None) -> StoredSweep:
    """Read and verify ``sweep``'s stored results (by name:
    :func:`rope_lessons.sweeps.load_sweep`).

    Raises:
        ValueError: if there are no results, the file was edited (hash), or it
            was made by another version or another configuration of the sweep.
    """
    found = read_results(sweep, results_dir)
    if found is None or found[0]["reference"] is None:
        raise ValueError(
            f"no stored results for sweep {sweep.name!r}: run "
            f"`python -m rope_lessons.sweeps {sweep.name}`"
        )
    content, where = found
    return StoredSweep(
        sweep=sweep,
        stored=tuple(RunResult.from_json(entry["result"]) for entry in content["results"]),
        records=tuple(entry["record"] for entry in content["results"]),
        reference=RunResult.from_json(content["reference"]["result"]),
        path=where,
    )
