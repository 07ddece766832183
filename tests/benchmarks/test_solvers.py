"""The CG solvers of the suite (``npbench_runs/solvers``) built on ``nvshmem.Allreduce``.

CPU: one PE (the reduction is the identity, the halo branches dropped), CG / pipelined CG / CSR CG in the host
emulation against NumPy, the 3-D slabs' tiles, the pipelined recurrences against CG's, nvcc builds device-linked
against NVSHMEM (``compile``) and the upstream DaCe baseline. GPU: the solvers on one PE against NumPy.
"""

import dace
import numpy as np
import pytest
from kernel_steps import puts

import dace_cpufree
from npbench_runs.solvers import PROGRAMS, csr, one_pe, poisson, poisson3d


def test_one_pe_makes_the_reduction_the_identity_and_drops_the_halo_branches():
    sdfg = one_pe(poisson.cg_poisson_2d)
    kinds = {type(n).__name__ for n, _ in sdfg.all_nodes_recursive()}
    assert not kinds & {"Allreduce", "Putmem", "SignalWait"}
    assert not {"__cpufree_pe", "__cpufree_npes"} & {str(s) for s in sdfg.free_symbols}


def _emulate(name: str, n: int, iters: int):
    run = dace_cpufree.compile(one_pe(PROGRAMS[name]), backend="emulate")
    if name == "cg_csr":
        indptr, indices, data, b = csr.initialize(n)
        x, hist = np.zeros_like(b), np.zeros(iters)
        run(indptr, indices, data, b, x, hist, **csr.symbols(indptr))
        return x, hist, csr.reference(indptr, indices, data, b, iters)
    if name == "cg_poisson_3d":
        args = poisson3d.arguments(n // 2, iters)
        run(*args)
        return args[1], args[2], poisson3d.reference_cg(poisson3d.initialize(n // 2), iters)
    args = poisson.arguments(name, n, iters)
    run(*args)
    x, hist = args[1], args[2]
    solve = poisson.reference_pipelined_cg if name.startswith("pipelined") else poisson.reference_cg
    return x, hist, solve(poisson.initialize(n), iters)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_solvers_in_the_emulation_match_numpy(name):
    x, hist, (x_ref, hist_ref) = _emulate(name, 16, 25)
    assert np.max(np.abs(hist - hist_ref) / hist_ref) <= 1e-10
    assert np.max(np.abs(x - x_ref)) <= 1e-10 * np.max(np.abs(x_ref))


def test_3d_slabs_put_whole_planes_into_the_neighbours_halos():
    """On several PEs each slab's edge planes travel to the neighbours' halo planes; the NumPy reference of the
    slabs glued back is the global one."""
    assert len(puts(dace_cpufree.persistent_sdfg(PROGRAMS["cg_poisson_3d"], shmem_transport="proxy"))) >= 2
    glob = poisson3d.initialize(8)
    parts = [poisson3d.tile(glob, pe, 4) for pe in range(4)]
    assert all(part.shape == (4, 10, 10) for part in parts)
    back = np.zeros_like(glob)
    for pe, part in enumerate(parts):
        poisson3d.place(back, part, pe, 4)
    np.testing.assert_array_equal(back, glob)


def test_pipelined_cg_follows_cg():
    """In exact arithmetic the pipelined recurrences are CG's; ``hist`` of the pipelined form is one behind."""
    _, cg = poisson.reference_cg(poisson.initialize(32), 30)
    _, pipelined = poisson.reference_pipelined_cg(poisson.initialize(32), 31)
    assert np.max(np.abs(pipelined[1:] - cg) / cg) <= 1e-8


@pytest.mark.compile
@pytest.mark.parametrize(
    "name, transport",
    [
        ("cg_poisson_2d", "proxy"),
        ("cg_poisson_2d", "p2p"),
        ("pipelined_cg_poisson_2d", "proxy"),
        ("cg_poisson_3d", "proxy"),
    ],
)
def test_solvers_build_and_device_link_against_nvshmem(name, transport):
    import subprocess

    from dace_cpufree.runtime import build

    source = dace_cpufree.kernel_source(PROGRAMS[name], shmem_transport=transport)
    library = build(
        source.code, f"solver_{name}_{transport}", "cuda", shmem=source.shmem, full_blocks=source.direct_stores
    )
    defined = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
    assert "nvshmemi_init_thread" in defined and "cpufree_run" in defined


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, transport",
    [(name, "p2p") for name in sorted(PROGRAMS)] + [("cg_poisson_2d", "proxy"), ("pipelined_cg_poisson_2d", "proxy")],
)
def test_solvers_on_one_gpu_match_numpy(name, transport):
    """One PE (no launcher): NVSHMEM's team reduction (proxy) and the gather form (p2p, and non-blocking) are the
    identity there, the halo branches are not taken."""
    n, iters = 62, 40
    run = dace_cpufree.compile(PROGRAMS[name], shmem_transport=transport)
    if name == "cg_csr":
        indptr, indices, data, b = csr.initialize(n)
        x, hist = np.zeros_like(b), np.zeros(iters)
        run(indptr, indices, data, b, x, hist, **csr.symbols(indptr))
        x_ref, hist_ref = csr.reference(indptr, indices, data, b, iters)
    elif name == "cg_poisson_3d":
        args = poisson3d.arguments(30, iters)
        run(*args)
        x, hist = args[1], args[2]
        x_ref, hist_ref = poisson3d.reference_cg(poisson3d.initialize(30), iters)
    else:
        args = poisson.arguments(name, n, iters)
        run(*args)
        x, hist = args[1], args[2]
        solve = poisson.reference_pipelined_cg if name.startswith("pipelined") else poisson.reference_cg
        x_ref, hist_ref = solve(poisson.initialize(n), iters)
    # the dot products' grid-wide atomics sum in another order than NumPy, and CG carries the rounding on
    assert np.max(np.abs(hist - hist_ref) / hist_ref) <= 1e-6
    assert np.max(np.abs(x - x_ref)) <= 1e-6 * np.max(np.abs(x_ref))


def test_upstream_dace_baseline_follows_the_same_recurrences(tmp_path, monkeypatch):
    """The upstream DaCe CG of the bench, built by upstream DaCe for the CPU here, gives NumPy's iterates; its
    GPU build without ``auto_optimize`` puts every map on the GPU with 256-thread blocks and the sums on CUB."""
    from dace.libraries.standard.nodes.reduce import Reduce

    from npbench_runs.frameworks import UpstreamDaCeFramework
    from npbench_runs.solvers import upstream

    monkeypatch.setenv("NPBENCH_RUNS_CACHE", str(tmp_path))
    run = UpstreamDaCeFramework("dace_cpu", ("pure",), gpu=False).prepare(upstream)
    n, iters = 14, 12
    b = poisson.initialize(n)
    x, hist = np.zeros_like(b), np.zeros(iters)
    run(b=b, x=x, hist=hist)
    x_ref, hist_ref = poisson.reference_cg(b, iters)
    np.testing.assert_allclose(hist, hist_ref, rtol=1e-12)
    np.testing.assert_allclose(x, x_ref, rtol=1e-12, atol=1e-14)

    sdfg = upstream.sdfg_without_auto_optimize()
    sdfg.validate()
    maps = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.MapEntry)]
    kernels = [m for m in maps if m.map.schedule == dace.ScheduleType.GPU_Device]
    assert kernels and all(m.map.gpu_block_size in ([32, 8, 1], [256, 1, 1]) for m in kernels)
    reductions = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, Reduce)]
    assert len(reductions) == 3 and {r.implementation for r in reductions} == {"CUDA (device)"}
    assert all(sdfg.arrays[a].storage == dace.StorageType.GPU_Global for a in ("b", "x", "hist"))
