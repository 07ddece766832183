"""Krylov solvers written as one ``@dace.program`` each, the whole solve in one persistent kernel.

``cg_poisson_2d`` and ``pipelined_cg_poisson_2d`` (:mod:`.poisson`: matrix-free 5-point Poisson, rows over the PEs,
halos by ``nvshmem.Putmem``/``SignalWait``, dot products by ``nvshmem.Allreduce``), ``cg_poisson_3d``
(:mod:`.poisson3d`: the 7-point operator, slabs of planes over the PEs) and ``cg_csr`` (:mod:`.csr`: a
CSR matrix, one PE). Each has a NumPy reference with the same recurrences; :mod:`.baselines` holds the host-driven
CuPy CG that :mod:`.bench` compares with.
"""

import dace
from dace_cpufree.transformations import PrepareCommunication

from . import csr, poisson, poisson3d

PROGRAMS = {
    "cg_poisson_2d": poisson.cg_poisson_2d,
    "pipelined_cg_poisson_2d": poisson.pipelined_cg_poisson_2d,
    "cg_poisson_3d": poisson3d.cg_poisson_3d,
    "cg_csr": csr.cg_csr,
}


def one_pe(program) -> dace.SDFG:
    """The SDFG of ``program`` specialised for one PE (``my_pe() = 0``, ``n_pes() = 1``, reductions the identity,
    halo branches gone): what ``dace_cpufree.compile(..., backend="emulate")`` runs on the host."""
    sdfg = program.to_sdfg(simplify=True)
    PrepareCommunication("emulate").apply_pass(sdfg, {})
    return sdfg


__all__ = ["PROGRAMS", "csr", "one_pe", "poisson", "poisson3d"]
