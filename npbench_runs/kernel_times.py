"""Where a call of a suite kernel spends its time on the GPU: the kernel's own time (device events) against the
wall time of the call (argument checks, launch, synchronisation), and, with ``--steps``, each step's time per
block (``DACE_CPUFREE_STEP_TIMES=1``).

    python -m npbench_runs.kernel_times gemm mlp --preset S
    python -m npbench_runs.kernel_times gemm --preset paper --steps

Inputs are CuPy arrays on the device, as in the NPBench runs; median of ``--calls`` calls after one warm-up call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kernels", nargs="+")
    p.add_argument("--preset", default="S")
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--steps", action="store_true", help="build with step timing and print each step's time")
    args = p.parse_args(argv)
    import cupy as cp
    import numpy as np

    import dace_cpufree
    from npbench_runs.kernels import KERNELS

    device = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    print(f"device: {device}")
    for name in args.kernels:
        k = KERNELS[name]
        host = k.initialize(**k.PRESETS[args.preset])
        dev = {a: cp.asarray(v) if isinstance(v, np.ndarray) else v for a, v in host.items()}
        run = dace_cpufree.compile(k.program, step_times=args.steps or None)  # the timed build is cached apart
        run(**dev)
        kernel_ms, wall_ms = [], []
        for _ in range(args.calls):
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            run(**dev)
            cp.cuda.Device().synchronize()
            wall_ms.append((time.perf_counter() - t) * 1e3)
            kernel_ms.append(run.last_kernel_ms)
        print(
            f"{name} {args.preset}: grid x block {run.launch_config}, kernel {statistics.median(kernel_ms):.4f} ms, "
            f"call {statistics.median(wall_ms):.4f} ms"
        )
        if args.steps:
            print(run.step_times().table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
