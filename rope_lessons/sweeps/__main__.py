"""The command line of the stored sweeps (from the repository root)::

    python -m rope_lessons.sweeps --list
    python -m rope_lessons.sweeps ch03_order [--seeds 0 1 2] [--device cpu] [--restart]
    python -m rope_lessons.sweeps ch03_order --dry-run [--throughput TOKENS_PER_S]
    python -m rope_lessons.sweeps ch03_order --labels
    python -m rope_lessons.sweeps ch03_order --only "rope" [--seeds 0]
    python -m rope_lessons.sweeps ch03_order --merge-from DIR

``--results-dir DIR`` writes and reads the results in ``DIR`` instead of the
package's folder; with it, two processes can train different seeds at once,
and ``--merge-from DIR`` then adds the runs one of them stored to the other's
file (:func:`~rope_lessons.evidence.store.merge_results`). ``--dry-run`` prints
the runs, the seeds, the (run, seed) pairs not stored yet and an estimated time
(:func:`~rope_lessons.evidence.store.dry_run`); ``--labels`` lists the variants.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from rope_lessons.evidence.runtime import choose_threads
from rope_lessons.evidence.store import dry_run, merge_results, run_sweep, without_paths
from rope_lessons.sweeps import available, get_sweep, load_sweep


def main(argv: Sequence[str] | None = None) -> None:
    """The command line: ``python -m rope_lessons.sweeps NAME`` (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m rope_lessons.sweeps",
        description="Train a stored sweep and write its results (resumes where it stopped).",
    )
    parser.add_argument("name", nargs="?", help="the sweep to run (see --list)")
    parser.add_argument("--list", action="store_true", help="list the sweeps and their state")
    parser.add_argument("--seeds", type=int, nargs="+", help="train only these of its seeds")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    parser.add_argument(
        "--restart", action="store_true", help="discard stored results of another version"
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        metavar="DIR",
        help="write and read results in DIR instead of the installed package's folder",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the runs, seeds, pending (run, seed) count and an estimated time; no training",
    )
    parser.add_argument(
        "--throughput",
        type=float,
        metavar="TOKENS_PER_S",
        help="with --dry-run: estimate from this throughput instead of measuring one",
    )
    parser.add_argument("--labels", action="store_true", help="list the variant labels of NAME")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="LABEL",
        help="train only these variants (see --labels); the others stay as stored",
    )
    parser.add_argument(
        "--merge-from",
        type=Path,
        metavar="DIR",
        help="add the runs stored in DIR (e.g. seeds trained by another process) and stop",
    )
    args = parser.parse_args(argv)
    results_dir: Path | None = args.results_dir
    if args.list:
        for name in available():
            sweep = get_sweep(name)
            try:
                state = load_sweep(sweep, results_dir).describe()
            except ValueError as error:
                state = f"not usable: {error}"
            print(f"{name} (v{sweep.version}): {sweep.description}\n    {state}")
        return
    if args.name is None:
        parser.error("name a sweep, or pass --list")
    if args.throughput is not None and not args.dry_run:
        parser.error("--throughput only applies with --dry-run")
    if args.only is not None and (args.dry_run or args.labels or args.merge_from is not None):
        parser.error("--only applies to training, not with --dry-run, --labels or --merge-from")
    try:
        sweep = get_sweep(args.name)
        if args.labels:
            print("\n".join(sweep.labels))
            return
        if args.merge_from is not None:
            path = merge_results(sweep, args.merge_from, results_dir)
            print(f"wrote {path}")
            print(load_sweep(sweep, path.parent).describe())
            return
        torch.set_num_threads(choose_threads())
        if args.dry_run:
            print(
                dry_run(
                    sweep,
                    seeds=args.seeds,
                    device=args.device,
                    results_dir=results_dir,
                    restart=args.restart,
                    throughput=args.throughput,
                )
            )
            return
        given = sys.argv[1:] if argv is None else list(argv)
        command = " ".join(
            ["python -m rope_lessons.sweeps", *map(shlex.quote, without_paths(given))]
        )
        path = run_sweep(
            sweep,
            seeds=args.seeds,
            device=args.device,
            results_dir=results_dir,
            restart=args.restart,
            command=command,
            labels=args.only,
        )
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    print(f"wrote {path}")
    print(load_sweep(sweep, path.parent).describe())


if __name__ == "__main__":
    main()
