"""What the MPI launcher (Open MPI, MPICH/Hydra, PMIx, Slurm) says about this process: its rank, the job's size,
its rank on the node, and whether the job spans several nodes. The one reader of the launcher's variables; the
compiler and the runtime both ask here. Imports nothing from the compiler layers."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

# (rank, size, local rank) variables, per launcher, in the order they are tried
_RANK_VARS = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
)
# (ranks in the job, ranks on this node) variables
_SIZE_VARS = (
    ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"),  # Open MPI
    ("PMI_SIZE", "MPI_LOCALNRANKS"),  # MPICH / Hydra (also NVSHMEM's nvshmrun)
    ("SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"),
)


@dataclass(frozen=True)
class Placement:
    """This process in its job. ``spans_nodes``: ``None`` where the launcher does not say."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    spans_nodes: bool | None = None


def placement(environ: Mapping[str, str] | None = None) -> Placement:
    """The launcher's placement of this process; ``Placement()`` (PE 0 of 1) without a launcher."""
    env = os.environ if environ is None else environ
    rank, size, local = 0, 1, 0
    for r, s, lr in _RANK_VARS:
        if r in env and s in env:
            rank, size = int(env[r]), int(env[s])
            local = int(env.get(lr, rank))
            break
    spans = None
    for total, on_node in _SIZE_VARS:
        if env.get(total, "").isdigit() and env.get(on_node, "").isdigit():
            spans = int(env[total]) > int(env[on_node])
            break
    if spans is None and env.get("SLURM_JOB_NUM_NODES", "").isdigit():
        spans = int(env["SLURM_JOB_NUM_NODES"]) > 1
    return Placement(rank, size, local, spans)
