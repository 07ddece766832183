"""Writes the generated CUDA and HIP of every benchmark kernel and stencil configuration into a folder, one file
each, so that a change to the compiler can be compared with the code before it (``diff -r before after``).

    python tests/benchmarks/generated_snapshot.py OUT_DIR

Configurations: each kernel of ``npbench_runs/kernels`` with the thread scheduler on and off, for CUDA and HIP;
the multi-GPU stencils (plain and overlapped forms) for CUDA (proxy and direct-store transports) and HIP.
A configuration the compiler refuses is written as a ``.error`` file with the message.
"""

from __future__ import annotations

import sys
from pathlib import Path


def configurations():
    """``(file name, program, keyword arguments of generate_code)`` of every configuration."""
    from npbench_runs.kernels import KERNELS
    from npbench_runs.multigpu import jacobi_2d, jacobi_3d, jacobi_3d_grid

    for name in sorted(KERNELS):
        for backend in ("cuda", "hip"):
            for scheduler in (True, False):
                tag = "sched" if scheduler else "plain"
                yield f"{name}.{tag}.{backend}", KERNELS[name].program, {"backend": backend, "scheduler": scheduler}
    for module in (jacobi_2d, jacobi_3d, jacobi_3d_grid):
        stencil = module.__name__.rsplit(".", 1)[1]
        for form in ("plain", "overlapped"):
            program = getattr(module, form)
            for transport in ("proxy", "p2p"):
                yield f"{stencil}.{form}.{transport}.cuda", program, {"backend": "cuda", "shmem_transport": transport}
            yield f"{stencil}.{form}.hip", program, {"backend": "hip"}


def main(argv: list[str]) -> int:
    import dace_cpufree

    if len(argv) != 1:
        print(__doc__)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for fname, program, options in configurations():
        try:
            (out / f"{fname}.txt").write_text(dace_cpufree.generate_code(program, **options))
        except dace_cpufree.CpufreeError as err:
            (out / f"{fname}.error").write_text(f"{type(err).__name__}: {err}\n")
    print(f"{len(list(out.iterdir()))} files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
