"""CPU: the multi-GPU benchmark programs on 2 and 4 PEs emulated on the host, under the race checker, against NumPy on
the global domain (the tiles glued back the way the benchmark's rank 0 does).

Each program is generated and built once (``compile(..., backend="emulate", pes=2, race_check=...)``) and run on 2
and 4 PEs (``with_pes``: the PE count is an argument of the library). Small domains and few steps: the checker records
every element access of every PE.
"""

import inspect

import numpy as np
import pytest

import dace_cpufree
from npbench_runs.multigpu import jacobi_2d, jacobi_3d, jacobi_3d_grid
from npbench_runs.solvers import PROGRAMS, poisson, poisson3d

PES = (2, 4)
#: global sizes: every tile of 2 and 4 PEs has at least 4 interior cells a side
SIZES = {jacobi_2d: 10, jacobi_3d: 18, jacobi_3d_grid: 10}
STEPS = 3


def _stencil_on_pes(run, module, pes: int, n: int, steps: int) -> None:
    module.check_size(n, pes)
    A0, B0 = module.initialize(n)
    calls = [
        dict(
            A=np.array(module.tile(A0, pe, pes)),
            B=np.array(module.tile(B0, pe, pes)),
            flags=np.zeros(module.FLAGS, dtype=np.uint64),
            TSTEPS=steps,
            **module.symbols(pes),
        )
        for pe in range(pes)
    ]
    run.on_pes(calls)
    want_a, want_b = A0.copy(), B0.copy()
    module.reference(want_a, want_b, steps)
    got_a, got_b = A0.copy(), B0.copy()
    for pe, call in enumerate(calls):
        module.place(got_a, call["A"], pe, pes)
        module.place(got_b, call["B"], pe, pes)
    np.testing.assert_allclose(got_a, want_a, rtol=0, atol=1e-12, err_msg=f"A on {pes} PEs")
    np.testing.assert_allclose(got_b, want_b, rtol=0, atol=1e-12, err_msg=f"B on {pes} PEs")


@pytest.mark.parametrize("form", ["plain", "overlapped"])
@pytest.mark.parametrize("module", [jacobi_2d, jacobi_3d, jacobi_3d_grid], ids=lambda m: m.__name__.split(".")[-1])
def test_stencil_on_emulated_pes_is_race_free_and_matches_numpy(module, form):
    run = dace_cpufree.compile(getattr(module, form), backend="emulate", pes=PES[0], race_check="shuffle")
    for pes in PES:
        _stencil_on_pes(run if pes == run.pes else run.with_pes(pes), module, pes, SIZES[module], STEPS)


def _solver_on_pes(run, name: str, pes: int, n: int, iters: int) -> None:
    names = list(inspect.signature(PROGRAMS[name].f).parameters)
    if name == "cg_poisson_3d":
        module, solve = poisson3d, poisson3d.reference_cg
        calls = [dict(zip(names, poisson3d.arguments(n, iters, pe, pes))) for pe in range(pes)]
    else:
        module = poisson
        solve = poisson.reference_pipelined_cg if name.startswith("pipelined") else poisson.reference_cg
        calls = [dict(zip(names, poisson.arguments(name, n, iters, pe, pes))) for pe in range(pes)]
    run.on_pes(calls)
    x_ref, hist_ref = solve(module.initialize(n), iters)
    x = np.zeros_like(module.initialize(n))
    for pe, call in enumerate(calls):
        module.place(x, call["x"], pe, pes)
        # every PE has the global residual norms (the reductions combine the PEs' sums in PE order)
        assert np.max(np.abs(call["hist"] - hist_ref) / hist_ref) <= 1e-10, (pes, pe)
    assert np.max(np.abs(x - x_ref)) <= 1e-10 * np.max(np.abs(x_ref)), pes


@pytest.mark.parametrize(
    "name, transport",
    [
        ("cg_poisson_2d", "proxy"),
        ("pipelined_cg_poisson_2d", "p2p"),
        ("cg_poisson_3d", "p2p"),
    ],
)
def test_solver_on_emulated_pes_is_race_free_and_matches_numpy(name, transport):
    """Halos by Putmem/SignalWait, dot products by Allreduce: NVSHMEM's team reduction and a block's put with signal
    (proxy), the gather form by direct stores (p2p: blocking in the 3-D CG, non-blocking in the pipelined one)."""
    run = dace_cpufree.compile(
        PROGRAMS[name], backend="emulate", pes=PES[0], race_check="shuffle", shmem_transport=transport
    )
    for pes in PES:
        _solver_on_pes(run if pes == run.pes else run.with_pes(pes), name, pes, 8, 5)
