"""Time RoPE's forms on one input and print the ratios to the vectorised form.

    python benchmarks/rope_speed.py [--seq-len 128] [--dim 64] [--device cpu]

Every form is first checked against the reference on the same input; then each
is timed with torch.utils.benchmark (median of repeated calls, one thread).
"""

from __future__ import annotations

import argparse
import platform

import torch

from rope_lessons.benchmark import format_timings, time_rope_forms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--min-run-time", type=float, default=0.5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(
        f"input (batch, heads, seq, dim) = ({args.batch}, {args.heads}, {args.seq_len}, "
        f"{args.dim}), float32, {args.device}; torch {torch.__version__}, {platform.processor()}"
    )
    timings = time_rope_forms(
        args.batch,
        args.heads,
        args.seq_len,
        args.dim,
        min_run_time=args.min_run_time,
        device=args.device,
    )
    print(format_timings(timings))


if __name__ == "__main__":
    main()
