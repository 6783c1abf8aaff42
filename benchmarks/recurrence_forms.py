"""Time the four forms of the linear recurrence as T grows and print ratios and log-log slopes.

    python benchmarks/recurrence_forms.py [--lengths 64 128 ... 16384] [--repeats 5]
                                          [--channels 16] [--batch 1]
                                          [--matrix-max-len 2048] [--threads 1]
                                          [--device cpu]

The forms of h_t = lambda h_{t-1} + x_t (complex64, one complex decay of
modulus 0.99 per channel): step by step (rope_lessons.chapters.recurrence.
linear_recurrence, the reference), the T x T matrix (linear_recurrence_parallel),
the associative scan and the FFT convolution (rope_lessons.chapters.scan). Every form is
first checked against the step-by-step one on the same input; then, at each
length, every form is timed in turn in every repeat (torch.utils.benchmark), so
that each ratio to the step-by-step form compares times taken moments apart.
The table gives each form's median time per call and its ratio to step by step
(min / median / max over repeats); then the slope of log(median time) on
log(T) fitted on every length the form was timed at (the T x T form only up to
--matrix-max-len: its kernel alone takes 8 * channels * T^2 bytes). On the CPU
the clock is the process's CPU time; on a GPU, wall time after synchronising.
"""

from __future__ import annotations

import argparse
import platform

import torch

from rope_lessons.chapters.scan import format_recurrence_timings, time_recurrence_forms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048, 4096, 8192]
    )
    parser.add_argument("--channels", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds per measurement")
    parser.add_argument(
        "--matrix-max-len", type=int, default=2048, help="longest T for the T x T form"
    )
    parser.add_argument("--threads", type=int, default=1, help="CPU threads")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine()
    print(
        f"input (batch, T, channels) = ({args.batch}, T, {args.channels}), complex64, "
        f"|decay| = 0.99; {device}, {where}, {torch.get_num_threads()} CPU thread(s); "
        f"torch {torch.__version__}; {args.repeats} repeats"
    )
    timings = time_recurrence_forms(
        args.lengths,
        channels=args.channels,
        batch=args.batch,
        repeats=args.repeats,
        min_time=args.min_time,
        matrix_max_len=args.matrix_max_len,
        device=device,
    )
    print(format_recurrence_timings(timings))


if __name__ == "__main__":
    main()
