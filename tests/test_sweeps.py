"""Stored sweeps: stored results come from today's code, edits are refused, sweeps resume."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from rope_lessons import sweep as sweep_module
from rope_lessons.experiments import RunResult, make_run, run_once
from rope_lessons.sweep import (
    REPRODUCTION_TOLERANCE,
    RESULTS_DIR,
    Sweep,
    available,
    get_sweep,
    largest_difference,
    load_sweep,
    main,
    run_sweep,
)
from rope_lessons.synthetic import CopyAtLag
from rope_lessons.training import Metrics

STORED = [name for name in available() if (RESULTS_DIR / f"{name}.json").is_file()]


@pytest.fixture
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def numbers(result: RunResult) -> RunResult:
    """The result without its wall time (the one field that differs between repeats)."""
    return dataclasses.replace(result, wall_seconds=0.0)


def test_largest_difference_finds_the_one_changed_number() -> None:
    a = RunResult("x", 0, [1.0, 0.5], {16: Metrics(1.0, 0.5, 0.5, 0.1)}, extra={"gain": 2.0})
    assert largest_difference(a, a) == 0.0
    for changed in (
        dataclasses.replace(a, losses=[1.0, 0.25]),
        dataclasses.replace(a, metrics={16: Metrics(1.0, 0.5, 0.75, 0.1)}),
        dataclasses.replace(a, extra={"gain": 2.25}),
    ):
        assert largest_difference(a, changed) == 0.25
    with pytest.raises(ValueError, match="different entries"):
        largest_difference(a, dataclasses.replace(a, metrics={32: Metrics(1.0, 0.5)}))
    with pytest.raises(ValueError, match="different runs"):
        largest_difference(a, dataclasses.replace(a, seed=1))


def test_there_is_a_stored_sweep() -> None:
    assert "ch03_order" in STORED


@pytest.mark.parametrize("name", STORED)
def test_the_reference_run_of_every_stored_sweep_reproduces(name: str, one_thread: None) -> None:
    """Train the cheapest stored (run, seed) again from today's code, on one CPU thread."""
    stored = load_sweep(name)
    run, seed = stored.sweep.reference()
    assert (stored.reference.label, stored.reference.seed) == (run.label, seed)
    assert run.cost <= min(r.cost for r in stored.sweep.runs)
    again = run_once(run, seed, "cpu", progress=False)
    assert largest_difference(again, stored.reference) <= REPRODUCTION_TOLERANCE


@pytest.mark.parametrize("name", STORED)
def test_a_hand_edited_results_file_is_refused(name: str, tmp_path: Path) -> None:
    shutil.copy(RESULTS_DIR / f"{name}.json", tmp_path)
    load_sweep(name, tmp_path)  # the copy itself is fine
    content = json.loads((tmp_path / f"{name}.json").read_text())
    metrics = content["results"][0]["result"]["metrics"]
    length = next(iter(metrics))
    metrics[length]["loss"] += 0.01  # (an accuracy may already be 1.0 and stay put)
    (tmp_path / f"{name}.json").write_text(json.dumps(content, indent=1))
    with pytest.raises(ValueError, match="edited by hand"):
        load_sweep(name, tmp_path)


def tiny_sweep(version: int = 1, steps: int = 3) -> Sweep:
    runs = tuple(
        make_run(
            f"lag {lag}",
            CopyAtLag(lag=lag, vocab=5),
            train_len=6,
            eval_lens=(6,),
            steps=steps + lag,  # lag 1 is the cheaper run
            eval_batches=1,
            dim=8,
            n_heads=2,
            n_layers=1,
        )
        for lag in (1, 2)
    )
    return Sweep("tiny", version, "a test sweep", runs, seeds=(0, 1))


def test_a_sweep_resumes_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    sweep = tiny_sweep()
    calls: list[tuple[str, int]] = []

    def interrupted_after_two(run, seed, device, progress):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append((run.label, seed))
        return run_once(run, seed, device, progress)

    monkeypatch.setattr(sweep_module, "run_once", interrupted_after_two)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, results_dir=tmp_path, progress=False)
    first = load_sweep(sweep, tmp_path)  # usable: the reference (lag 1, seed 0) is in
    assert len(first.stored) == 2 and not first.complete

    def counted(run, seed, device, progress):
        calls.append((run.label, seed))
        return run_once(run, seed, device, progress)

    monkeypatch.setattr(sweep_module, "run_once", counted)
    run_sweep(sweep, results_dir=tmp_path, progress=False)
    assert calls == [("lag 1", 0), ("lag 2", 0), ("lag 1", 1), ("lag 2", 1)]  # each once
    second = load_sweep(sweep, tmp_path)
    assert second.complete and second.stored[:2] == first.stored
    assert numbers(second.results("lag 2")[1]) == numbers(
        run_once(sweep.runs[1], 1, progress=False)
    )
    record = second.records[0]
    for key in ("command", "device", "threads", "torch", "numpy", "python", "date", "git_commit"):
        assert key in record
    assert [r.seed for r in second.results("lag 1")] == [0, 1]


def test_a_reference_outside_the_trained_seeds_is_trained_on_the_cpu(
    tmp_path: Path, one_thread: None
) -> None:
    sweep = tiny_sweep()
    run_sweep(sweep, seeds=[1], results_dir=tmp_path, progress=False)
    stored = load_sweep(sweep, tmp_path)
    assert sorted(r.seed for r in stored.stored) == [1, 1]
    assert numbers(stored.reference) == numbers(run_once(sweep.runs[0], 0, progress=False))


def test_other_versions_and_changed_runs_are_refused(tmp_path: Path) -> None:
    run_sweep(tiny_sweep(), seeds=[0], results_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"version 1 .* the code is version 2"):
        load_sweep(tiny_sweep(version=2), tmp_path)
    with pytest.raises(ValueError, match="differently from the stored ones"):
        load_sweep(tiny_sweep(steps=4), tmp_path)
    with pytest.raises(ValueError, match="--restart"):
        run_sweep(tiny_sweep(version=2), seeds=[0], results_dir=tmp_path, progress=False)
    run_sweep(tiny_sweep(version=2), seeds=[0], results_dir=tmp_path, restart=True, progress=False)
    assert load_sweep(tiny_sweep(version=2), tmp_path).sweep.version == 2


def test_bad_names_give_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=r"no sweep named 'ch3'; the sweeps are \[.*ch03_order"):
        get_sweep("ch3")
    with pytest.raises(SystemExit) as exit_info:
        main(["ch3"])
    assert exit_info.value.code == 2 and "no sweep named 'ch3'" in capsys.readouterr().err
    sweep = tiny_sweep()
    with pytest.raises(ValueError, match="no run labelled 'lag 3'"):
        sweep.run("lag 3")
    with pytest.raises(ValueError, match=r"seeds \[7\] are not seeds"):
        run_sweep(sweep, seeds=[7], results_dir=Path("/nonexistent"), progress=False)
    with pytest.raises(ValueError, match="labels must be unique"):
        Sweep("twice", 1, "", (sweep.runs[0], sweep.runs[0]), seeds=(0,))
    with pytest.raises(ValueError, match="lower-case identifier"):
        Sweep("Ch 3", 1, "", sweep.runs, seeds=(0,))
    with pytest.raises(ValueError, match="no stored results"):
        load_sweep(sweep, Path("/nonexistent"))


def test_list_names_every_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--list"])
    out = capsys.readouterr().out
    for name in available():
        assert f"{name} (v{get_sweep(name).version})" in out
