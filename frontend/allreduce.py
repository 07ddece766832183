"""The ``Allreduce`` library node: an in-place reduction of a small 1-D buffer over all PEs.

``nvshmem.Allreduce(buffer, op)`` in a ``@dace.program`` becomes this node (``phase="all"``); the
non-blocking form ``nvshmem.Allreduce(buffer, op, nonblocking=True)`` ... ``nvshmem.AllreduceWait(buffer)``
becomes two (``"start"``, ``"wait"``), and the work between them overlaps the reduction. Expansions:

- NVSHMEM (``"all"``): ``nvshmemx_<T>_<op>_reduce_block(NVSHMEM_TEAM_WORLD, buf, buf, n)`` by the threads of one
  block (in place: NVSHMEM allows ``dest == source``);
- ROC_SHMEM (``"all"``): ``rocshmem_ctx_<T>_<op>_reduce_wg(ROCSHMEM_CTX_DEFAULT, team, buf, buf, n)`` by one
  work-group; the team handle is a host variable in rocSHMEM, copied to the device by the launcher
  (``cpufree::shmem::team_world()``);
- the *gather* form (``"start"``/``"wait"`` with every library, and ``"all"`` with direct stores, NVSHMEM_P2P):
  one thread copies the buffer into its slot of a symmetric ``[2, n_pes, n]`` array, puts it into the same slot
  on every other PE and signals it there (``flags[parity, me] = round``); the wait polls the ``n_pes - 1`` flags
  and combines the slots in PE order (every PE gets the same bits). Rounds alternate between two parities, so a
  PE one round ahead never overwrites a slot that is still being read. The slots, flags and round counter are
  added by :class:`~dace_cpufree.transformations.PrepareCommunication` (``cpufree/shmem.cuh``, ``gather``).

The node runs on block ``block`` (0: the block whose thread 0 also runs the program's scalar work, so the
scalars computed from the result need no grid synchronisation).
"""

from __future__ import annotations

import dace
from dace import data as dt
from dace import library
from dace.frontend.python.common import StringLiteral
from dace.properties import Property
from dace.sdfg import nodes
from dace.transformation.transformation import ExpandTransformation

from dace_cpufree.cpp import cexpr
from dace_cpufree.errors import CommunicationError
from dace_cpufree.facts import CpufreeTasklet, placement
from dace_cpufree.vocabulary import N_PES_SYMBOL, PE_SYMBOL

from .environments import NVSHMEM, ROCSHMEM
from .layout import _dims, is_dense
from .putmem import _check_prepared, _edge
from .shmem_api import NVSHMEM_API, NVSHMEM_P2P_API, ROCSHMEM_API, ShmemAPI

#: Operators by the names a program may use (ours, and DaCe's ``dace.comm.Allreduce`` spelling).
OPS = {"sum": "sum", "max": "max", "min": "min", "prod": "prod"}
OPS.update({f"MPI_{k.upper()}": v for k, v in OPS.items()})
#: ``cpufree::Op`` of each operator (the gather form combines the slots itself).
CPUFREE_OPS = {"sum": "Sum", "max": "Max", "min": "Min", "prod": "Product"}
#: NVSHMEM's reduction type names (NVSHMEMI_REPT_FOR_STANDARD_REDUCE_TYPES: every type of a typed put reduces).
NVSHMEM_TYPES = NVSHMEM_API.type_names
#: rocSHMEM's ``rocshmem_ctx_<T>_<op>_reduce_wg`` exists for these types only (rocshmem_COLL.hpp).
ROCSHMEM_TYPES = {
    dace.float64: "double",
    dace.float32: "float",
    dace.int64: "longlong",
    dace.int32: "int",
    dace.int16: "short",
}
#: The parts of the non-blocking form.
PHASES = ("all", "start", "wait")


def op_name(op, call: str) -> str:
    """Our name of ``op`` (``"sum"`` ...), or a :class:`CommunicationError` naming the ones there are."""
    op = op.value if isinstance(op, StringLiteral) else op  # how DaCe's frontend hands over a string constant
    name = (OPS.get(op) or OPS.get(op.lower()) or OPS.get(op.upper())) if isinstance(op, str) else None
    if name is None:
        raise CommunicationError(
            f"{call}: unsupported reduction operator {op!r}. Fix: use one of 'sum', 'max', 'min', 'prod' "
            "(or DaCe's 'MPI_SUM', 'MPI_MAX', 'MPI_MIN', 'MPI_PROD')."
        )
    return name


def check_buffer(sdfg: dace.SDFG, region, call: str) -> None:
    """The buffer is a dense run of an array's elements, of a type every SHMEM library reduces."""
    desc = sdfg.arrays[region.data]
    if isinstance(desc, dt.Scalar):
        raise CommunicationError(
            f"{call}: buffer '{region.data}' is a scalar; a reduction works in place on array memory that other "
            f"PEs can address. Fix: use a one-element array, e.g. {region.data} = np.zeros((1,), np.float64), "
            f"assign {region.data}[0] = ... and reduce {region.data}."
        )
    if not is_dense(_dims(desc, region.subset)):
        raise CommunicationError(
            f"{call}: buffer {region} is not contiguous in memory; the reduction works on one dense run of "
            "elements. Fix: reduce a contiguous 1-D array (copy the values into np.zeros((n,), dtype) first)."
        )
    if desc.dtype not in NVSHMEM_TYPES:
        raise CommunicationError(
            f"{call}: buffer '{region.data}' has dtype {desc.dtype.to_string()}, which the SHMEM reductions do not "
            f"support. Fix: use one of {', '.join(t.to_string() for t in NVSHMEM_TYPES)}."
        )


def _count(state, node) -> str:
    return cexpr(_edge(state, node, "_in", False).data.subset.num_elements())


def _library_call(node, state, sdfg, api: ShmemAPI) -> str:
    """The blocking reduction as the library's block-cooperative call (all threads of the block)."""
    dtype = sdfg.arrays[_edge(state, node, "_in", False).data.data].dtype
    n = _count(state, node)
    if api.name == "ROCSHMEM":
        if dtype not in ROCSHMEM_TYPES:
            raise CommunicationError(
                f"Allreduce '{node.label}': rocSHMEM reduces {', '.join(t.to_string() for t in ROCSHMEM_TYPES)} "
                f"only, not {dtype.to_string()}. Fix: reduce a buffer of one of those types."
            )
        name = f"rocshmem_ctx_{ROCSHMEM_TYPES[dtype]}_{node.op}_reduce_wg"
        return f"{name}(ROCSHMEM_CTX_DEFAULT, cpufree::shmem::team_world(), _out, _in, (int)({n}));"
    name = f"nvshmemx_{NVSHMEM_TYPES[dtype]}_{node.op}_reduce_block"
    return f"{name}(NVSHMEM_TEAM_WORLD, _out, _in, (size_t)({n}));"


def gather_code(node, state, api: ShmemAPI) -> str:
    """The gather form: ``start`` sends this PE's values, ``wait`` combines everyone's (one thread)."""
    n = _count(state, node)
    ns = "cpufree::shmem::p2p" if api.direct else "cpufree::shmem"
    pes = f"{PE_SYMBOL}, {N_PES_SYMBOL}"
    lines = []
    if node.phase in ("all", "start"):
        lines.append(f"const uint64_t __round = cpufree::shmem::gather_begin(_slots, _round, _in, {pes}, {n});")
        lines.append(f"{ns}::gather_send(_slots, _flags, __round, {pes}, {n});")
    if node.phase in ("all", "wait"):
        if node.phase == "wait":
            lines.append("const uint64_t __round = _round[0];")
        lines.append(f"{ns}::gather_receive(_flags, __round, {pes});")
        op = CPUFREE_OPS[node.op]
        lines.append(f"cpufree::shmem::gather_combine<cpufree::Op::{op}>(_out, _slots, __round, {N_PES_SYMBOL}, {n});")
    return "\n".join(lines)


def _expand(node, state, sdfg, api: ShmemAPI) -> nodes.Tasklet:
    _check_prepared(node)
    ptr = lambda c, out: dace.pointer(sdfg.arrays[_edge(state, node, c, out).data.data].dtype)  # noqa: E731
    inputs = {c: ptr(c, False) for c in node.in_connectors}
    outputs = {c: ptr(c, True) for c in node.out_connectors}
    if node.gather:
        code, executor, remote = gather_code(node, state, api), "thread", ["_flags"] if "_flags" in outputs else []
    else:
        code, executor, remote = _library_call(node, state, sdfg, api), "block", []
    collective = ""
    if not node.gather:  # every PE must enter the library's collective: a PE that stopped would leave it waiting
        info = node.debuginfo
        line = f" at {info.filename}:{info.start_line}" if info is not None and info.start_line else ""
        collective = f"Allreduce (the SHMEM library's collective reduction){line}"
    # ordered: DaCe's state fusion must not merge its state with independent dataflow (whose topological order
    # could then move work from between a non-blocking start and its wait to before the start)
    where = placement(executor, node.block, remote)
    return CpufreeTasklet(node.label, inputs, outputs, code, **where, collective=collective, ordered=True)


@library.expansion
class ExpandAllreduceNVSHMEM(ExpandTransformation):
    environments = [NVSHMEM]

    @staticmethod
    def expansion(node, parent_state, parent_sdfg, **kwargs):
        return _expand(node, parent_state, parent_sdfg, NVSHMEM_API)


@library.expansion
class ExpandAllreduceNVSHMEMP2P(ExpandTransformation):
    environments = [NVSHMEM]

    @staticmethod
    def expansion(node, parent_state, parent_sdfg, **kwargs):
        return _expand(node, parent_state, parent_sdfg, NVSHMEM_P2P_API)


@library.expansion
class ExpandAllreduceROCSHMEM(ExpandTransformation):
    environments = [ROCSHMEM]

    @staticmethod
    def expansion(node, parent_state, parent_sdfg, **kwargs):
        return _expand(node, parent_state, parent_sdfg, ROCSHMEM_API)


@library.node
class Allreduce(nodes.LibraryNode):
    """Reduces the buffer (``_in``, written back through ``_out``: the same region) over all PEs with ``op``.

    ``phase``: ``"all"`` (blocking), ``"start"`` or ``"wait"`` (the two halves of the non-blocking form; between
    them the buffer's value is undefined). ``gather`` and the connectors ``_slots``/``_flags``/``_round`` are set
    by :class:`~dace_cpufree.transformations.PrepareCommunication`.
    """

    implementations = {
        "NVSHMEM": ExpandAllreduceNVSHMEM,
        "NVSHMEM_P2P": ExpandAllreduceNVSHMEMP2P,
        "ROCSHMEM": ExpandAllreduceROCSHMEM,
    }
    default_implementation = "NVSHMEM"

    op = Property(dtype=str, default="sum", choices=tuple(CPUFREE_OPS), desc="reduction operator")
    phase = Property(dtype=str, default="all", choices=PHASES, desc="blocking, or a half of the non-blocking form")
    waited = Property(dtype=bool, default=False, desc="a start whose AllreduceWait the frontend has seen")
    gather = Property(dtype=bool, default=False, desc="through symmetric slots and flags instead of the library")
    block = Property(dtype=int, default=0, desc="thread block (modulo the grid) that runs the reduction")
    prepared = Property(dtype=bool, default=False, desc="placed in a persistent kernel by PrepareCommunication")

    def __init__(self, name, op="sum", phase="all", **kwargs):
        super().__init__(name, inputs={"_in"}, outputs={"_out"}, **kwargs)
        self.op, self.phase = op, phase

    @property
    def free_symbols(self) -> set[str]:
        return super().free_symbols | ({PE_SYMBOL, N_PES_SYMBOL} if self.gather else set())

    def has_side_effects(self, sdfg) -> bool:
        return True  # a collective: removing it on one PE would hang the others
