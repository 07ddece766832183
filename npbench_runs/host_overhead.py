"""The host's part of one call of a suite kernel at a small preset: the wall time of our call against its kernel's
own time (device events), split into the binding of the arguments and the launch, with CuPy's call of the same
NumPy code as the baseline, all in one process on one GPU.

    python -m npbench_runs.host_overhead k2mm gemm --preset S --calls 200

Variants, each timed as the harness times a framework (a fresh device-side copy of the inputs per call, not timed;
the device synchronised before the clock starts and stops; the garbage collector off inside the clock):

``cupy``           the kernel's NumPy reference on CuPy arrays (the harness's ``cupy``)
``ours``           ``run(**args)`` on CuPy arrays (the harness's ``dace_cpufree``): the common path
``ours general``   the same call through the general path, which checks and converts every argument with its
                   messages on every call (the path every call took before calls of the common kind were bound
                   from what the same shapes gave before)
``launch only``    the launcher alone on launch values bound before the clock starts (``cpufree_run`` as ``ours``
                   runs it: events and launch, returning once they are queued; the harness's synchronisation waits
                   for the kernel): the call without the binding

Every variant's first call is validated against NumPy (the kernel's ``RTOL``/``ATOL``). The calls of the variants
alternate (one of each per round), so that a drifting clock touches all alike. Printed per kernel: median and
minimum wall time per call, median kernel time, wall minus kernel, and the binding's share (``ours`` and ``ours
general`` minus ``launch only``).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys

import numpy as np


def _validate(module, args, ret, ref: dict) -> str:
    """Empty when every output matches NumPy's, else what differs."""
    import cupy as cp

    problems = []
    for name in module.OUTPUTS:
        got = cp.asnumpy(ret if name == "__return" else args[name])
        if got.shape != ref[name].shape or not np.allclose(got, ref[name], rtol=module.RTOL, atol=module.ATOL):
            problems.append(name)
    return ", ".join(problems)


def _reference(module, host: dict) -> dict:
    args = copy.deepcopy(host)
    ret = module.reference(**args)
    return {name: np.asarray(ret if name == "__return" else args[name]) for name in module.OUTPUTS}


def measure(name: str, preset: str, calls: int) -> dict:
    """``{variant: {"wall": [ms], "kernel": [ms]}}`` of one kernel, after validating each variant."""
    import dace_cpufree
    from npbench_runs import frameworks
    from npbench_runs.kernels import KERNELS
    from npbench_runs.worker import _timed_run

    module = KERNELS[name]
    host = module.initialize(**module.PRESETS[preset])
    ref = _reference(module, host)
    fw = frameworks.get("dace_cpufree")  # copy() and synchronize() as the harness does them
    dev = fw.to_device(host)
    run = dace_cpufree.compile(module.program, backend="cuda")

    def launch_only(bound):
        call, returned = bound
        run._complete(run._stream(), call, (), wait=not run._returns_early)  # as a call of this kind
        return (returned[0] if len(returned) == 1 else tuple(returned)) if returned else None

    def bind(args):
        bound = run._signature.quick((), dict(args))
        if bound is None:
            raise SystemExit(f"{name}: the arguments are not of the common kind; nothing to compare")
        return bound

    variants = {
        "cupy": (module.reference, None),
        "ours": (run, None),
        "ours general": (lambda **a: run._general_call((), a), None),
        "launch only": (launch_only, bind),
    }
    out = {v: {"wall": [], "kernel": []} for v in variants}
    for variant, (call, binder) in variants.items():  # validated first calls (and warm-up)
        _, ret, args = _timed_run(call, fw, dev, binder)
        bad = _validate(module, args, ret, ref)
        if bad:
            raise SystemExit(f"{name} {preset}: {variant} differs from NumPy in {bad}")
    for _ in range(calls):
        for variant, (call, binder) in variants.items():
            seconds, _, _ = _timed_run(call, fw, dev, binder)
            out[variant]["wall"].append(seconds * 1e3)
            out[variant]["kernel"].append(run.last_kernel_ms if variant != "cupy" else float("nan"))
    out["grid"] = run.launch_config
    return out


def report(name: str, preset: str, out: dict) -> str:
    med = {v: statistics.median(t["wall"]) for v, t in out.items() if v != "grid"}
    lines = [f"{name} {preset}: grid x block {out['grid']}; all variants validated against NumPy"]
    lines.append(f"  {'variant':14s} {'wall ms':>9s} {'min ms':>9s} {'kernel ms':>10s} {'wall-kernel us':>15s}")
    for variant, times in out.items():
        if variant == "grid":
            continue
        kernel = statistics.median(times["kernel"])
        gap = "-" if variant == "cupy" else f"{(med[variant] - kernel) * 1e3:.1f}"
        kernel_text = "-" if variant == "cupy" else f"{kernel:.4f}"
        lines.append(f"  {variant:14s} {med[variant]:9.4f} {min(times['wall']):9.4f} {kernel_text:>10s} {gap:>15s}")
    launch = med["launch only"]
    lines.append(
        f"  binding per call: ours {(med['ours'] - launch) * 1e3:.1f} us, ours general "
        f"{(med['ours general'] - launch) * 1e3:.1f} us; speedup over cupy (wall): ours "
        f"{med['cupy'] / med['ours']:.2f}x, ours general {med['cupy'] / med['ours general']:.2f}x"
    )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kernels", nargs="+")
    p.add_argument("--preset", default="S")
    p.add_argument("--calls", type=int, default=200, help="timed calls of each variant (default 200)")
    args = p.parse_args(argv)
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)['name'].decode()}", flush=True)
    for name in args.kernels:
        print(report(name, args.preset, measure(name, args.preset, args.calls)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
