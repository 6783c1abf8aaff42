"""Stored sweeps: stored results come from today's code on any CPU, edits are refused,
changes of meaning are caught, sweeps resume."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import rope_lessons.rope.kernels as kernels_module
from rope_lessons.evidence import comparisons, runs
from rope_lessons.evidence import store as sweep_module
from rope_lessons.evidence.comparisons import t_quantile
from rope_lessons.evidence.reproduction import (
    PREFIX_TOLERANCE,
    StoredSweep,
    prediction_interval,
    seeds_apart,
)
from rope_lessons.evidence.runs import PREFIX_STEPS, Run, RunResult, make_run, order_run, run_once
from rope_lessons.evidence.store import RESULTS_DIR, current_names, measure_throughput, run_sweep
from rope_lessons.evidence.sweep import Sweep, same_config
from rope_lessons.evidence.training import Metrics
from rope_lessons.sweeps import __main__ as command_line
from rope_lessons.sweeps import available, get_sweep, load_sweep
from rope_lessons.sweeps.__main__ import main
from rope_lessons.toy import synthetic
from rope_lessons.toy.synthetic import CopyAtLag

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


def test_every_sweep_is_stored() -> None:
    assert available() == STORED


@pytest.mark.parametrize("name", STORED)
def test_the_prefix_of_every_stored_sweep_reproduces(name: str, one_thread: None) -> None:
    """Train the first PREFIX_STEPS steps of the reference (run, seed) again from today's
    code, on one CPU thread: the losses and the held-out numbers after them must match
    on any instruction set (the full runs diverge in their last bits, then more)."""
    stored = load_sweep(name)
    run, seed = stored.sweep.reference()
    assert (stored.reference.label, stored.reference.seed) == (run.label, seed)
    again = run_once(run, seed, "cpu", progress=False, stop_after=PREFIX_STEPS)
    check = stored.check(again)
    assert check.prefix_gap is not None and check.prefix_eval_gaps is not None
    assert check.prefix_matches, str(check)


@pytest.mark.parametrize("name", STORED)
def test_every_stored_run_carries_its_curve_checkpoints_and_a_clean_record(name: str) -> None:
    stored = load_sweep(name)
    for result, record in zip(stored.stored, stored.records, strict=True):
        run = stored.sweep.run(result.label)
        assert len(result.losses) == run.steps
        assert tuple(result.checkpoints) == run.checkpoint_steps
        assert result.checkpoints[run.steps] == result.metrics
        # The command as typed: rope_lessons.sweep until the command line moved to
        # rope_lessons.sweeps (records keep what was run).
        assert record["command"].startswith(
            (f"python -m rope_lessons.sweep {name}", f"python -m rope_lessons.sweeps {name}")
        )
        assert "/" not in record["command"]  # no path of the machine that ran it
        assert record["processor"] and record["cpu_capability"] in ("DEFAULT", "AVX2", "AVX512")


def test_a_full_rerun_reproduces(one_thread: None) -> None:
    """The reference of ch03_order trained to the end: the prefix matches its stored seed
    and the final numbers lie within the stored seeds' prediction intervals."""
    stored = load_sweep("ch03_order")
    run, seed = stored.sweep.reference()
    check = stored.check(run_once(run, seed, "cpu", progress=False))
    assert check.checkpoint == run.steps
    assert check.reproduces, str(check)
    cheaper = stored.check(run_once(run, seed, "cpu", progress=False, checkpoints=False))
    assert cheaper.checkpoint == run.steps and cheaper.prefix_eval_gaps is None
    assert cheaper.reproduces, str(cheaper)


def flipped_rotation(monkeypatch: pytest.MonkeyPatch, run: Run[Any]) -> Run[Any]:
    turn = kernels_module.rotate_complex
    monkeypatch.setattr(kernels_module, "rotate_complex", lambda x, phase: turn(x, phase.conj()))
    return run


def another_learning_rate(monkeypatch: pytest.MonkeyPatch, run: Run[Any]) -> Run[Any]:
    return dataclasses.replace(run, lr=run.lr * 1.1)


def another_data_stream(monkeypatch: pytest.MonkeyPatch, run: Run[Any]) -> Run[Any]:
    sampler = synthetic.batch_sampler  # the function runs imported

    def shifted(data, batch_size, length, *, seed, split="train", device="cpu"):  # type: ignore[no-untyped-def]
        seed = seed + 1 if split == "train" else seed
        return sampler(data, batch_size, length, seed=seed, split=split, device=device)

    monkeypatch.setattr(runs, "batch_sampler", shifted)
    return run


@pytest.mark.parametrize(
    "change",
    [flipped_rotation, another_learning_rate, another_data_stream],
    ids=lambda f: f.__name__,
)
def test_a_change_of_meaning_fails_the_check(
    change: Callable[[pytest.MonkeyPatch, Run[Any]], Run[Any]],
    monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:
    """Each change moves the prefix by at least ten times the tolerance: far beyond what
    another instruction set does (about 1e-6), so the check tells them apart."""
    stored = load_sweep("ch03_order")
    run, seed = stored.sweep.reference()
    changed = change(monkeypatch, run)
    check = stored.check(run_once(changed, seed, "cpu", progress=False, stop_after=PREFIX_STEPS))
    assert not check.prefix_matches and not check.reproduces
    assert check.prefix_gap is not None and check.prefix_gap > 10 * PREFIX_TOLERANCE
    assert "DIFFERS" in str(check)


def t_tail(t: float, df: int) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom, by integrating its density
    (substituting u = 1/x on [t, inf), trapezoids on 200 000 intervals)."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    steps = 200_000
    u = torch.linspace(0.0, 1.0 / t, steps + 1, dtype=torch.float64)[1:]  # skip u = 0
    x = 1.0 / u
    density = torch.exp(log_c - (df + 1) / 2 * torch.log1p(x * x / df)) / (u * u)
    width = 1.0 / t / steps
    return float(torch.trapezoid(density, dx=width))


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 19, 30])
def test_the_t_quantiles_leave_half_a_permille_in_each_tail(df: int) -> None:
    assert t_tail(t_quantile(0.999, df), df) == pytest.approx(0.0005, rel=0.01)


def test_the_prediction_interval_covers_new_seeds_as_promised() -> None:
    """Draw 3 'stored seeds' and one new seed from a normal distribution 20 000 times:
    the new seed falls outside the interval about 0.1% of the time (and far more
    often outside the plain range of the three)."""
    generator = torch.Generator().manual_seed(0)
    draws = torch.randn(20_000, 4, generator=generator, dtype=torch.float64).tolist()
    outside = outside_range = 0
    for *seeds, new in draws:
        low, high = prediction_interval(seeds, floor=0.0)
        outside += not low <= new <= high
        outside_range += not min(seeds) <= new <= max(seeds)
    assert outside / len(draws) < 0.003
    assert outside_range / len(draws) > 0.4  # 2 / (n + 1) = 50% for three seeds
    assert prediction_interval([1.0, 1.0, 1.0], floor=0.02) == (0.98, 1.02)
    assert prediction_interval([0.5], floor=0.1) == (0.4, 0.6)
    with pytest.raises(ValueError, match="at least one value"):
        prediction_interval([], floor=0.1)


def test_configurations_compare_numbers_to_a_relative_tolerance() -> None:
    theta = [1.0, 0.1, 0.01]
    recomputed = [value * (1 + 1e-15) for value in theta]
    assert same_config({"theta": theta, "p": 1}, {"theta": recomputed, "p": 1})
    assert not same_config({"theta": theta}, {"theta": [1.0, 0.1, 0.0100001]})
    assert not same_config({"theta": theta}, {"theta": theta[:2]})
    assert not same_config({"causal": True}, {"causal": 1})
    assert not same_config({"layout": "half"}, {"layout": "interleaved"})
    assert not same_config({"a": 1}, {"b": 1})


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

    def interrupted_after_two(run, seed, device, progress):  # type: ignore[no-untyped-def]
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append((run.label, seed))
        return run_once(run, seed, device, progress)

    monkeypatch.setattr(sweep_module, "run_once", interrupted_after_two)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, results_dir=tmp_path, progress=False)
    first = load_sweep(sweep, tmp_path)  # usable: the reference (lag 1, seed 0) is in
    assert len(first.stored) == 2 and not first.complete

    def counted(run, seed, device, progress):  # type: ignore[no-untyped-def]
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
    for key in ("command", "device", "processor", "cpu_capability", "threads", "torch"):
        assert key in record
    assert record["command"] == "python -m rope_lessons.sweeps tiny"
    assert record["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert [r.seed for r in second.results("lag 1")] == [0, 1]


def test_the_check_reads_a_tiny_sweep(tmp_path: Path, one_thread: None) -> None:
    """On the machine that stored them, re-runs match; a seed that is not stored is
    compared by its spread alone; a result from another run is refused."""
    sweep = tiny_sweep()
    run_sweep(sweep, results_dir=tmp_path, progress=False)
    stored: StoredSweep = load_sweep(sweep, tmp_path)
    same = stored.check(run_once(sweep.runs[0], 1, progress=False))
    assert same.reproduces and same.prefix_gap == 0.0
    assert "reproduces: True" in str(same)
    new_seed = stored.check(run_once(sweep.runs[0], 5, progress=False))
    assert new_seed.prefix_gap is None and "seed not stored" in str(new_seed)
    assert not new_seed.compared and not new_seed.reproduces  # a 4-step run has no later checkpoint
    longer = run_once(tiny_sweep(steps=9).runs[0], 0, progress=False)
    with pytest.raises(ValueError, match="took 10 steps; the run defines 4"):
        stored.check(longer)


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


@pytest.fixture
def tiny_command_line(monkeypatch: pytest.MonkeyPatch) -> Sweep:
    """A tiny sweep that the command line finds under any name."""
    sweep = tiny_sweep()
    monkeypatch.setattr(command_line, "get_sweep", lambda name: sweep)
    return sweep


def fabricated(sweep: Sweep, values: dict[int, list[float]]) -> StoredSweep:
    """A stored sweep of the run 'lag 1' whose held-out loss at each checkpoint is given
    per seed (``values[step][seed]``); everything else is a placeholder."""
    run = sweep.run("lag 1")
    results = tuple(
        RunResult(
            "lag 1",
            seed,
            [1.0] * run.steps,
            checkpoints={
                step: {6: Metrics(values[step][seed] if step in values else 1.0, 0.5)}
                for step in run.checkpoint_steps
            },
        )
        for seed in sweep.seeds
    )
    return StoredSweep(sweep, results, ({},) * len(results), results[0], "fabricated")


def test_convergence_compares_the_last_fifth_with_the_seed_spread() -> None:
    sweep = tiny_sweep(steps=19)  # 'lag 1' has 20 steps: checkpoints 4, 8, 12, 16, 20
    assert sweep.run("lag 1").checkpoint_steps == (4, 8, 12, 16, 20)
    still = fabricated(sweep, {16: [2.0, 2.2], 20: [1.5, 1.7]})
    moving = still.convergence("lag 1", 6)
    assert moving.steps == (16, 20) and moving.change == pytest.approx(-0.5)
    assert moving.spread == pytest.approx(0.2 / 2**0.5)  # sample stdev of 1.5 and 1.7
    assert not moving.converged and "STILL MOVING" in str(moving)
    settled = fabricated(sweep, {16: [1.6, 1.7], 20: [1.5, 1.7]}).convergence("lag 1", 6)
    assert settled.change == pytest.approx(-0.05) and settled.converged
    tiny_change = fabricated(sweep, {16: [1e-3, 1e-3], 20: [2e-4, 2e-4]}).convergence("lag 1", 6)
    assert tiny_change.spread == 0.0 and tiny_change.converged  # below CONVERGENCE_FLOOR
    with pytest.raises(ValueError, match="not 12"):
        still.convergence("lag 1", 12)
    with pytest.raises(ValueError, match="has no 'answer_accuracy'"):
        still.convergence("lag 1", 6, "answer_accuracy")


def test_convergence_catches_a_seed_stuck_on_a_plateau_the_others_left() -> None:
    """Five seeds: four settle near 1.4, one stays near 2.1 (it barely moves). The mean
    change is small against the spread the stuck seed makes, so the mean alone says
    converged; the seed apart from the others' prediction interval says otherwise."""
    sweep = dataclasses.replace(tiny_sweep(steps=19), seeds=(0, 1, 2, 3, 4))
    before = [1.45, 1.47, 1.44, 1.46, 2.12]
    after = [1.40, 1.42, 1.38, 1.41, 2.11]
    stuck = fabricated(sweep, {16: before, 20: after}).convergence("lag 1", 6)
    assert abs(stuck.change) <= stuck.spread  # what the mean-only rule looked at
    assert stuck.apart == (4,) and not stuck.converged
    assert "SEED 4 APART FROM THE OTHERS" in str(stuck)
    together = fabricated(sweep, {16: [*before[:4], 1.46], 20: [*after[:4], 1.41]})
    assert together.convergence("lag 1", 6).apart == ()
    assert seeds_apart({0: 1.0, 1: 5.0}, 0.01) == ()  # two seeds: nothing to compare with


def test_labels_lists_the_variants(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--labels", "ch05_prope"])
    assert capsys.readouterr().out.splitlines() == get_sweep("ch05_prope").labels


def test_dry_run_counts_what_is_pending_and_trains_nothing(
    tmp_path: Path, tiny_command_line: Sweep, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tiny_command_line
    main(["tiny", "--dry-run", "--throughput", "1000", "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    total = 2 * sum(run.cost for run in sweep.runs)
    assert f"pending: 4 of 4 (run, seed) pairs, {total:,} tokens" in out
    assert "seeds: 0 1" in out and f"lag 2: {sweep.runs[1].cost:,}" in out
    assert "estimated time: about" in out and "an estimate" in out and "stated" in out
    assert list(tmp_path.iterdir()) == []  # nothing trained, nothing written
    run_sweep(sweep, seeds=[0], results_dir=tmp_path, progress=False)
    main(["tiny", "--dry-run", "--results-dir", str(tmp_path)])  # measures this machine
    out = capsys.readouterr().out
    assert "pending: 2 of 4 (run, seed) pairs" in out
    assert "measured on cpu" in out and "4 steps and one evaluation of 'lag 1'" in out
    assert len(load_sweep(sweep, tmp_path).stored) == 2  # the dry run trained nothing
    with pytest.raises(SystemExit):
        main(["tiny", "--throughput", "1000"])  # a throughput only estimates a dry run


def test_the_dry_run_estimate_is_within_twice_the_time_the_sweep_takes(
    tmp_path: Path, one_thread: None
) -> None:
    """The estimate (measured throughput, Run.cost) against the same sweep trained right
    after it on the same machine: chapter 3's order run, 100 steps, two seeds."""
    sweep = Sweep("timed", 1, "", (order_run("rope", steps=100),), seeds=(0, 1))
    estimate = sweep.runs[0].cost * 2 / measure_throughput(sweep)
    started = time.perf_counter()
    run_sweep(sweep, results_dir=tmp_path, progress=False)
    actual = time.perf_counter() - started
    assert 0.5 < estimate / actual < 2.0, (estimate, actual)


def test_results_dir_is_where_the_command_line_writes_and_reads(
    tmp_path: Path,
    tiny_command_line: Sweep,
    capsys: pytest.CaptureFixture[str],
    one_thread: None,
) -> None:
    sweep = tiny_command_line
    main(["tiny", "--seeds", "1", "--results-dir", str(tmp_path)])
    assert f"wrote {tmp_path / 'tiny.json'}" in capsys.readouterr().out
    assert not (RESULTS_DIR / "tiny.json").exists()
    assert sorted(r.seed for r in load_sweep(sweep, tmp_path).stored) == [1, 1]
    main(["tiny", "--dry-run", "--seeds", "1", "--results-dir", str(tmp_path)])
    assert "pending: 0 of 2 (run, seed) pairs" in capsys.readouterr().out


def test_only_trains_the_named_variants(
    tmp_path: Path,
    tiny_command_line: Sweep,
    capsys: pytest.CaptureFixture[str],
    one_thread: None,
) -> None:
    sweep = tiny_command_line
    main(["tiny", "--only", "lag 2", "--seeds", "0", "--results-dir", str(tmp_path)])
    capsys.readouterr()
    assert [(r.label, r.seed) for r in load_sweep(sweep, tmp_path).stored] == [("lag 2", 0)]
    with pytest.raises(SystemExit):
        main(["tiny", "--only", "lag 9", "--results-dir", str(tmp_path)])
    assert "lag 9" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["tiny", "--only", "lag 1", "--dry-run"])
    assert "--only applies to training" in capsys.readouterr().err


def test_ch07_stores_every_hundred_steps_and_the_trained_decays() -> None:
    """The chapter-7 sweep evaluates every 100 steps (its steps-to-solve are known to 100)
    and keeps the trained decays of the real and complex mixers, inside the unit disc."""
    stored = load_sweep("ch07_recurrent")
    for label in stored.sweep.labels:
        run = stored.sweep.run(label)
        assert set(range(100, run.steps + 1, 100)) <= set(run.checkpoint_steps)
        for result in stored.results(label):
            moduli = [v for k, v in result.extra.items() if k.startswith("modulus/")]
            phases = [v for k, v in result.extra.items() if k.startswith("phase/")]
            if "retnet" in label:
                assert result.extra == {}  # retention's decays are fixed, nothing to store
                continue
            expected = 16 if label.endswith("/complex") else 32
            assert len(moduli) == len(phases) == expected
            assert all(0 < m < 1 for m in moduli)
            assert all(-math.pi <= p <= math.pi for p in phases)
            if label.endswith("/real"):
                assert all(p == 0.0 for p in phases)


def test_seeds_trained_apart_merge_into_one_file(tmp_path: Path, one_thread: None) -> None:
    """Two processes train seed 0 and seed 1 into separate folders; merging gives the
    same results as one run of both seeds, each entry with its own record."""
    sweep = tiny_sweep()
    first, second, together = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    run_sweep(sweep, seeds=[0], results_dir=first, progress=False, command="seed 0")
    run_sweep(sweep, seeds=[1], results_dir=second, progress=False, command="seed 1")
    run_sweep(sweep, results_dir=together, progress=False)
    with pytest.raises(ValueError, match="holds no results"):
        sweep_module.merge_results(sweep, tmp_path / "empty", first)
    sweep_module.merge_results(sweep, second, first)
    sweep_module.merge_results(sweep, second, first)  # again: nothing is added twice
    merged, whole = load_sweep(sweep, first), load_sweep(sweep, together)
    assert merged.complete and len(merged.stored) == len(whole.stored) == 4
    for run in sweep.runs:
        assert [numbers(r) for r in merged.results(run.label)] == [
            numbers(r) for r in whole.results(run.label)
        ]
    assert {record["command"] for record in merged.records} == {"seed 0", "seed 1"}
    assert numbers(merged.reference) == numbers(whole.reference)
    # into an empty folder, the source is copied
    sweep_module.merge_results(sweep, second, tmp_path / "d")
    assert {r.seed for r in load_sweep(sweep, tmp_path / "d").stored} == {1}


def test_a_recorded_command_names_no_folder(tmp_path: Path, one_thread: None) -> None:
    assert sweep_module.without_paths(["x", "--results-dir=/tmp/a", "--merge-from", "/b/c"]) == [
        "x",
        "--results-dir=DIR",
        "--merge-from",
        "DIR",
    ]
    assert sweep_module.without_paths(["x", "--seeds", "1", "2"]) == ["x", "--seeds", "1", "2"]


def test_a_stored_sweep_tables_its_variants_without_pandas() -> None:
    stored = load_sweep("ch03_order")
    table = stored.table("answer_accuracy")
    assert list(table) == list(stored.sweep.labels)
    for label, row in table.items():
        assert row == comparisons.metric_by_length(stored.results(label), "answer_accuracy")
    assert stored.table() == {  # each run's own metric: accuracy for this task
        label: comparisons.metric_by_length(stored.results(label), "accuracy")
        for label in stored.sweep.labels
    }
    text = stored.format_table("answer_accuracy").splitlines()
    assert text[0].startswith("ch03_order: answer_accuracy, mean (s.d.) over the stored seeds")
    assert text[1].split() == ["variant", "length", "16", "length", "32", "length", "64"]
    rope = table["rope"][32]
    assert text[2].split()[0] == "rope" and f"{rope.mean:.3f} (s.d. {rope.std:.3f})" in text[2]
    with pytest.raises(ValueError, match="name"):
        stored.table("perplexity")


def test_every_name_a_stored_configuration_records_resolves_after_the_moves() -> None:
    """Stored configurations keep the qualified names they were written with (their hash
    covers them); :func:`~rope_lessons.evidence.store.current_names` maps the modules that
    moved since, and every name must then import as the object the code describes."""
    names: set[str] = set()

    def collect(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)
        elif isinstance(value, str) and value.startswith("rope_lessons."):
            names.add(value)

    for path in sorted(RESULTS_DIR.glob("ch0[3-8]_*.json")):
        collect(json.loads(path.read_text(encoding="utf-8"))["config"])
    assert names, "no qualified names found in the stored configurations"
    moved = {name for name in names if current_names(name) != name}
    assert moved, "no stored name needs the map: MOVED_MODULES is dead code"
    for name in sorted(names):
        module_name, _, attribute = current_names(name).rpartition(".")
        module = importlib.import_module(module_name)
        assert hasattr(module, attribute), f"{name} -> {current_names(name)} does not resolve"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(next(iter(sorted(moved))).rpartition(".")[0])
