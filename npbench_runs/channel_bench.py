"""What the device <-> host channel costs on a GPU: the round trip of a host callback, and Jacobi 2-D per time step
with and without the channel (progress bar, cancel points only, debug waits).

    python -m npbench_runs.channel_bench                      # on a GPU machine
    python -m npbench_runs.channel_bench --backend emulate    # the same on the host emulation (no GPU)
    python -m npbench_runs.channel_bench --calls 20000 --steps 20000 --repeats 7 --json out.json

Round trip: a program whose time loop calls a Python function once per iteration (the leader writes the request,
the host's poller thread answers, the leader goes on); the host stamps each call, and the interval between two
calls is one round trip (the kernel does nothing else in between). Reported: median and p99 of the intervals, and
the kernel time per call from device events.

Jacobi 2-D at NPBench's S size (N=150), ``--steps`` time steps (more than S's 50, so that a step's time is
measured over many): the kernel time from device events divided by the steps, ``--repeats`` rounds in which every
build runs once (in rotating order), for the plain build, ``progress=True`` (cancel points and progress at every
loop head and grid sync), ``channel=True`` (cancel points only) and ``debug_waits=True`` (the hand-written grid
barrier of the hang reports); each build's ratio to the plain one within a round, median over the rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import dace
import numpy as np

import dace_cpufree
from npbench_runs.kernels import jacobi_2d

N = dace.symbol("N")
_stamps: list[float] = []


def stamp(x):
    """The host callback: records when it was called. ``math.gamma`` keeps DaCe from parsing it (so it stays a
    callback); its value is 1."""
    _stamps.append(time.perf_counter())
    return x + math.gamma(1.0) - 1.0


@dace.program
def round_trips(A: dace.float64[N], T: dace.int64):
    for _ in range(T):
        y: dace.float64 = stamp(A[0])
        A[0] = y + 1.0


def _percentile(values, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(math.ceil(q / 100.0 * len(ordered))) - 1)]


def bench_round_trip(backend: str, calls: int) -> dict:
    run = dace_cpufree.compile(round_trips, backend=backend)
    A = np.zeros(32)
    run(A, 100)  # warm up: build, first launch, the poller's spin
    _stamps.clear()
    run(A, calls)
    gaps = np.diff(np.asarray(_stamps)) * 1e6
    return {
        "calls": calls,
        "round_trip_median_us": float(statistics.median(gaps)),
        "round_trip_p99_us": float(_percentile(gaps, 99)),
        "round_trip_max_us": float(gaps.max()),
        "kernel_us_per_call": run.last_kernel_ms * 1e3 / calls if backend != "emulate" else float("nan"),
        "python_function_median_us": float(statistics.median(run.last_call_times) * 1e6),
    }


def bench_jacobi(backend: str, steps: int, repeats: int) -> dict:
    """Per-step time of each build. The builds run in turn within each round (the order rotating from round to
    round), so that a drift of the GPU's clock or temperature over the run reaches them alike; each build's ratio to
    the plain one is taken within a round, and the median over the rounds is reported."""
    n = jacobi_2d.PRESETS["S"]["N"]
    configs = {
        "plain": {},
        "progress=True": {"progress": "text"},
        "channel=True": {"channel": True},
        "debug_waits=True": {"debug_waits": True},
    }
    data = jacobi_2d.initialize(N=n, TSTEPS=steps)
    runs = {name: dace_cpufree.compile(jacobi_2d.program, backend=backend, **o) for name, o in configs.items()}
    for run in runs.values():
        run(data["A"].copy(), data["B"].copy(), 10)  # warm up
    names = list(configs)
    per_step = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            A, B = data["A"].copy(), data["B"].copy()
            start = time.perf_counter()
            runs[name](A, B, steps)
            wall = time.perf_counter() - start
            ms = runs[name].last_kernel_ms if backend != "emulate" else wall * 1e3
            per_step[name].append(ms * 1e3 / steps)
    out = {}
    for name in names:
        ratios = [t / p for t, p in zip(per_step[name], per_step["plain"])]
        out[name] = {
            "us_per_step_median": float(statistics.median(per_step[name])),
            "us_per_step_all": per_step[name],
            "vs_plain": float(statistics.median(ratios)) if all(p > 0 for p in per_step["plain"]) else float("nan"),
            "vs_plain_range": [float(min(ratios)), float(max(ratios))],
        }
        if backend != "emulate":
            out[name]["grid"] = list(runs[name].launch_config)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cuda", choices=("cuda", "emulate"))
    parser.add_argument("--calls", type=int, default=10000, help="host callbacks in the round-trip run")
    parser.add_argument("--steps", type=int, default=10000, help="Jacobi 2-D time steps per run (N=150)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    result = {"backend": args.backend}
    if args.backend == "cuda":
        probe = dace_cpufree.compile(round_trips)
        result["device"] = probe.device_name()
    result["round_trip"] = bench_round_trip(args.backend, args.calls)
    rt = result["round_trip"]
    print(
        f"host callback round trip ({args.backend}, {rt['calls']} calls): median {rt['round_trip_median_us']:.2f} us, "
        f"p99 {rt['round_trip_p99_us']:.2f} us, max {rt['round_trip_max_us']:.1f} us; kernel time per call "
        f"{rt['kernel_us_per_call']:.2f} us; the Python function itself {rt['python_function_median_us']:.2f} us"
    )
    result["jacobi_2d_S"] = bench_jacobi(args.backend, args.steps, args.repeats)
    print(f"jacobi_2d N=150, {args.steps} steps, median of {args.repeats}:")
    for name, value in result["jacobi_2d_S"].items():
        low, high = value["vs_plain_range"]
        print(
            f"  {name:<18} {value['us_per_step_median']:8.3f} us/step  ({value['vs_plain']:.3f}x plain, median of "
            f"the rounds' ratios; {low:.3f}-{high:.3f})"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
