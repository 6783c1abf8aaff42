"""Time RoPE's forms at several lengths and print ratios to apply_rope, a plain copy and HF.

    python benchmarks/rope_speed.py --quick     # four points, under a minute
    python benchmarks/rope_speed.py [--seq-lens 128 512 2048 8192] [--repeats 7]
                                    [--batch 1] [--heads 8 16] [--dims 64 128]
                                    [--threads 1] [--device cpu]

Every form is first checked against the reference on the same input; then all
forms are timed in turn, in every repeat, with torch.utils.benchmark. The
table gives each form's median time per call and its time as a multiple of the
reference form in the same repeat (min / median / max over repeats), then the
median over repeats of its time as a multiple of a plain copy of the input
(the memory-bound floor) and of Hugging Face's ``x*cos + rotate_half(x)*sin``
in the same repeat. By default the grid is every length with 8 and 16 heads
of dimension 64 and 128, one table per (heads, dimension), about five minutes
on two cores; ``--quick`` times 512 and 2048 positions (where every target
applies) with 8 heads of dimension 64 and 128. The memory-bound regime of a Llama-sized head is
``--seq-lens 8192 --heads 16 --dims 128``.

The run ends with the speed targets at every point: ``apply_rope`` in either
layout at most 1.05 times Hugging Face's formula, and the interleaved layout at
most twice a copy from 512 positions on (medians over repeats, with their
spread: a verdict inside the spread is a tie).
"""

from __future__ import annotations

import argparse
import platform

import torch

from rope_lessons.evidence.benchmark import (
    format_targets,
    format_timings,
    target_row,
    time_rope_forms,
)

QUICK = {"seq_lens": [512, 2048], "heads": [8], "dims": [64, 128], "repeats": 5, "min_time": 0.03}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="four points, under a minute")
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[128, 512, 2048, 8192])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds per measurement")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    torch.set_num_threads(args.threads)
    print(
        f"float32, {args.device}, {torch.get_num_threads()} CPU thread(s); torch "
        f"{torch.__version__}, {platform.processor() or platform.machine()}; "
        f"{args.repeats} repeats"
    )
    rows = []
    for heads in args.heads:
        for dim in args.dims:
            print(f"\ninput (batch, heads, T, dim) = ({args.batch}, {heads}, T, {dim})")
            timings = time_rope_forms(
                args.seq_lens,
                batch=args.batch,
                heads=heads,
                dim=dim,
                repeats=args.repeats,
                min_time=args.min_time,
                device=args.device,
            )
            print(format_timings(timings))
            rows += [target_row(timings, (args.batch, heads, T, dim)) for T in args.seq_lens]
    print("\nspeed targets: median [min, max] over repeats of the ratio in the same repeat")
    print(format_targets(rows))


if __name__ == "__main__":
    main()
