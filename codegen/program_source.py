"""The generator's entry for a whole program: the compile options turned into the generator's settings, the checks
that need the transformed program, and the channel's facts read from it, in one place (the API calls only this)."""

from __future__ import annotations

import dace

from dace_cpufree.errors import CpufreeError
from dace_cpufree.options import CompileOptions
from dace_cpufree.vocabulary import collectives, communicates, has_symmetric

from .channel import ChannelSpec, program_channel, program_waits
from .cuda import CUDA
from .hip import HIP
from .kernel import KernelSource, generate

#: The dialect of each backend: the emulation builds the CUDA text for the host.
BACKEND_DIALECTS = {"cuda": CUDA, "hip": HIP, "emulate": CUDA}


def program_source(sdfg: dace.SDFG, opts: CompileOptions) -> KernelSource:
    """The generated code of a transformed SDFG with the facts the build and the runtime read."""
    direct = opts.backend == "cuda" and opts.shmem_transport == "p2p" and has_symmetric(sdfg)
    calls, tags = program_channel(sdfg)
    shmem = communicates(sdfg)
    spec = None
    if opts.wants_channel(calls):
        _check_channel_beside_collectives(sdfg, shmem)
        spec = ChannelSpec(
            progress_loops=bool(opts.progress),
            ring=opts.notify_ring,
            call_timeout=opts.callback_timeout,
            debug_waits=opts.debug_waits,
            tags=tags,
            waits=program_waits(sdfg) if shmem else {},
        )
    return generate(
        sdfg,
        BACKEND_DIALECTS[opts.backend],
        direct_stores=direct,
        step_times=opts.step_times,
        race_check=opts.race_check is not None,
        channel=spec,
        concurrent_steps=opts.concurrent_steps,
        shmem=shmem,
    )


def _check_channel_beside_collectives(sdfg: dace.SDFG, shmem: bool) -> None:
    """Refuses the channel in a program with a collective every PE must enter (a PE stopped by its channel would leave
    its peers waiting there)."""
    stuck = collectives(sdfg) if shmem else []
    if stuck:
        raise CpufreeError(
            f"'{sdfg.name}' communicates through {'; '.join(stuck)}, which every PE must enter, and the device "
            "<-> host channel (progress, cancel, notify, callbacks, debug_waits) stops each PE at a point of its "
            "own: a PE that stopped would leave its peers waiting there. Fix: use Allreduce(..., nonblocking=True) "
            "with AllreduceWait, or shmem_transport='p2p' on one node (both wait in a way a PE can leave), or "
            "compile without the channel."
        )
