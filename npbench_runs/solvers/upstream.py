"""CG on the 2-D Poisson problem as an upstream DaCe user writes it for one GPU: the recurrences of
:mod:`.recurrence` in NumPy under ``@dace.program``, built by :class:`npbench_runs.frameworks.UpstreamDaCeFramework`
(``auto_optimize(GPU, use_gpu_storage=True)``). DaCe runs the iteration loop on the host and launches the
product, the two dot products and the vector updates as kernels each iteration; the dot products stay in device
memory (one-element arrays), so nothing is read back per iteration, unlike the CuPy baseline.

The problem, layout and ``hist`` are :func:`.poisson.cg_poisson_2d`'s on one PE: ``b`` and ``x`` padded
``(N + 2) x (N + 2)`` with a zero ring, ``hist[k] = ||r_{k+1}||``.
"""

import dace
import numpy as np

NAME = "cg_poisson_2d_upstream"
LX, NY, K = (dace.symbol(s) for s in ("LX", "NY", "K"))


@dace.program
def program(b: dace.float64[LX, NY], x: dace.float64[LX, NY], hist: dace.float64[K]):
    r = np.zeros((LX, NY), dtype=np.float64)
    p = np.zeros((LX, NY), dtype=np.float64)
    q = np.zeros((LX, NY), dtype=np.float64)
    rr = np.zeros((1,), dtype=np.float64)
    pq = np.zeros((1,), dtype=np.float64)
    rn = np.zeros((1,), dtype=np.float64)
    x[:] = 0.0
    r[:] = b
    p[:] = b
    rr[0] = np.sum(r[1:-1, 1:-1] * r[1:-1, 1:-1])
    for k in range(K):
        q[1:-1, 1:-1] = 4.0 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        pq[0] = np.sum(p[1:-1, 1:-1] * q[1:-1, 1:-1])
        x[1:-1, 1:-1] += (rr[0] / pq[0]) * p[1:-1, 1:-1]
        r[1:-1, 1:-1] -= (rr[0] / pq[0]) * q[1:-1, 1:-1]
        rn[0] = np.sum(r[1:-1, 1:-1] * r[1:-1, 1:-1])
        hist[k] = np.sqrt(rn[0])
        p[1:-1, 1:-1] = r[1:-1, 1:-1] + (rn[0] / rr[0]) * p[1:-1, 1:-1]
        rr[0] = rn[0]


def sdfg_without_auto_optimize() -> dace.SDFG:
    """The program on the GPU the way DaCe's tutorials place it, for where ``auto_optimize`` fails: every map and
    array moved to the GPU (``apply_gpu_transformations``), the sums on CUB's device reduction (DaCe's
    ``CUDA (device)`` expansion of ``Reduce``), then simplified. On the GPU host, DaCe 2.0.0b1's ``auto_optimize``
    of this program stops in the ``GPUAuto`` expansion of the sums (a sympy ``TypeError`` comparing two
    ``typeclass`` objects), which ``auto_optimize`` picks for every top-level reduction."""
    from dace.libraries.standard.nodes.reduce import Reduce

    sdfg = program.to_sdfg(simplify=True)
    sdfg.name = NAME + "_gpu"
    for name in ("b", "x", "hist"):  # device arrays (CuPy), as with ``use_gpu_storage=True``
        sdfg.arrays[name].storage = dace.StorageType.GPU_Global
    sdfg.apply_gpu_transformations()
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, Reduce):
            node.implementation = "CUDA (device)"
    sdfg.simplify()
    for node, _ in sdfg.all_nodes_recursive():  # 256 threads a block, not DaCe's default of one warp
        if isinstance(node, dace.nodes.MapEntry) and node.map.schedule == dace.ScheduleType.GPU_Device:
            node.map.gpu_block_size = [32, 8, 1] if len(node.map.params) > 1 else [256, 1, 1]
    return sdfg
