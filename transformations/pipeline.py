"""The passes from the SDFG of DaCe's frontend to the SDFG the generator prints, declared in order.

:data:`PARSED` mends what DaCe's frontend builds differently from NumPy; it runs on the SDFG of a ``@dace.program``
(not on an SDFG a user hands in), around DaCe's simplification. :data:`PERSISTENT` makes any SDFG one persistent
kernel. :func:`run` runs a list with the compile options; each :class:`Stage` names what it does and what it
modifies, so the order and the reasons are read here, not reconstructed from the API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dace
from dace_cpufree.frontend.callbacks import host_callbacks

from dace_cpufree.errors import CpufreeError
from dace_cpufree.options import CompileOptions

from .arg_reductions import split_arg_reductions
from .block_scopes import mark_inlined_states, prepare_block_scopes
from .communication import PrepareCommunication
from .frontend_states import rehome_nested_call_states
from .fuse_persistent import FusePersistentKernel
from .halo_exchange import distribute
from .numpy_types import check_mean_bindings, numpy_result_types
from .rounded_sizes import round_library_sizes_as_integers
from .schedule_threads import ScheduleThreads
from .typed_copies import convert_typed_copies, keep_assignments_apart


@dataclass(frozen=True)
class Stage:
    """One pass of the pipeline.

    :ivar name: what it does; :ivar modifies: what of the SDFG it may change; :ivar run: the pass.
    """

    name: str
    modifies: str
    run: Callable[[dace.SDFG, CompileOptions], object]


def _specialize(sdfg: dace.SDFG, opts: CompileOptions) -> None:
    """The size symbols of ``opts.symbols`` replaced by their values (extents become known at compile time)."""
    symbols = opts.symbols
    if not symbols:
        return
    unknown = sorted(set(symbols) - set(map(str, sdfg.free_symbols)))
    if unknown:
        raise CpufreeError(
            f"symbols {', '.join(unknown)} are not free symbols of '{sdfg.name}'. "
            f"Fix: specialize some of {', '.join(sorted(map(str, sdfg.free_symbols)))}."
        )
    sdfg.replace_dict({k: int(v) for k, v in symbols.items()})
    for k in symbols:
        if k in sdfg.symbols:
            sdfg.remove_symbol(k)


def _distribute(sdfg: dace.SDFG, opts: CompileOptions) -> None:
    if opts.distribute:
        distribute(sdfg, dict(opts.distribute))


def _communication(sdfg: dace.SDFG, opts: CompileOptions) -> None:
    backend = "cuda" if opts.backend == "emulate" else opts.backend  # the emulation runs NVSHMEM's expansions
    PrepareCommunication(backend, opts.shmem_transport, opts.early_puts).apply_pass(sdfg, {})


def _schedule(sdfg: dace.SDFG, opts: CompileOptions) -> None:
    enabled, elementwise = bool(opts.scheduler), opts.scheduler == "all"
    ScheduleThreads(tile_sizes=opts.tile_sizes, enabled=enabled, elementwise=elementwise).apply_pass(sdfg, {})


#: the frontend's SDFG of a program, mended where it differs from NumPy, then simplified
PARSED: tuple[Stage, ...] = (
    Stage(
        "np.mean's states moved into their loop or branch", "control flow", lambda s, o: rehome_nested_call_states(s)
    ),
    Stage("a mean bound to its sum refused", "nothing", lambda s, o: check_mean_bindings(s)),
    Stage("NumPy's result types", "container types, tasklet casts", lambda s, o: numpy_result_types(s)),
    Stage("copies between types made conversions", "dataflow", lambda s, o: convert_typed_copies(s)),
    Stage("assignments computed from their target kept apart", "dataflow", lambda s, o: keep_assignments_apart(s)),
    Stage("DaCe's simplification", "everything", lambda s, o: s.simplify(validate=False)),
    Stage("library sizes as integer roundings", "library memlets", lambda s, o: round_library_sizes_as_integers(s)),
)

#: any SDFG made one persistent kernel
PERSISTENT: tuple[Stage, ...] = (
    Stage("print and Python callbacks through the channel", "tasklets", lambda s, o: host_callbacks(s)),
    Stage("compiled-in size symbols", "symbols", _specialize),
    Stage("split over the PEs, halo exchanges (distribute=)", "containers, maps, control flow", _distribute),
    Stage("@mapgridscope block functions inlined", "control flow, states", lambda s, o: prepare_block_scopes(s)),
    Stage("np.argmax/argmin as two reductions", "dataflow", lambda s, o: split_arg_reductions(s)),
    Stage("SHMEM calls placed and expanded", "dataflow, storage", _communication),
    Stage("one persistent kernel", "everything", lambda s, o: FusePersistentKernel().apply_pass(s, {})),
    Stage("inlined steps of block functions kept on their blocks", "state marks", lambda s, o: mark_inlined_states(s)),
    Stage("tile sizes of the maps", "map properties", _schedule),
    Stage("validation", "nothing", lambda s, o: s.validate()),
)


def run(sdfg: dace.SDFG, stages: tuple[Stage, ...], opts: CompileOptions) -> dace.SDFG:
    """Runs ``stages`` on ``sdfg`` in order, in place; returns ``sdfg``."""
    for stage in stages:
        stage.run(sdfg, opts)
    return sdfg
