"""Resolution of the arguments of SHMEM calls in a ``@dace.program`` to containers and subsets.

DaCe's Python frontend hands replacement functions a *view* for a sliced argument (``A[1, :]`` becomes
a new ``ArrayView`` ``A_0``; only calls named ``dace.comm.*`` get ``(name, subset)``), and a *scalar
copy* for an indexed one (``flags[0]`` becomes a transient ``flags_index`` filled by a copy in the state
before the call). A put needs the address of the original element, so both are traced back here to the
container they come from and the subset they cover: the frontend records views in
``ProgramVisitor.views``, and an index copy is the only edge into its scalar.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import dace
from dace import data as dt
from dace import subsets
from dace.sdfg import nodes

from dace_cpufree import memlets
from dace_cpufree.errors import CommunicationError


@dataclass(frozen=True)
class Region:
    """A rectangular region ``subset`` of container ``data``."""

    data: str
    subset: subsets.Range

    def __str__(self) -> str:
        return f"{self.data}[{self.subset}]"

    def shape(self) -> list:
        """The extents of the region with length-one dimensions dropped (NumPy's view shape)."""
        return [s for s in self.subset.size() if s != 1]


def call_site(pv, kind: str) -> str:
    """``"Putmem (program.py:12)"``: the call as errors name it, from the line DaCe's frontend is parsing."""
    info = getattr(pv, "current_lineinfo", None)
    if info is None or not info.start_line:
        return kind
    return f"{kind} ({os.path.basename(info.filename or '')}:{info.start_line})"


def _index_copy(sdfg: dace.SDFG, name: str):
    """The ``(state, copy edge)`` that fills the frontend's scalar copy ``name`` of an indexed element."""
    found = None
    for state in sdfg.states():
        for node in state.data_nodes():
            if node.data != name:
                continue
            for edge in state.in_edges(node):
                if isinstance(edge.src, nodes.AccessNode) and not edge.data.is_empty():
                    found = (state, edge)
    return found


def resolve_region(pv, sdfg: dace.SDFG, value, call: str, role: str) -> Region:
    """The container and subset that argument ``role`` of ``call`` refers to.

    :param pv: the frontend's ``ProgramVisitor``; its ``views`` map a view to ``(data, memlet)``.
    """
    if not isinstance(value, str) or value not in sdfg.arrays:
        raise CommunicationError(
            f"{call}: '{role}' must be an array or a slice of one (got {value!r}). "
            f"Fix: pass a NumPy-style slice of an array argument or transient, e.g. A[0, 1:-1]."
        )
    views = getattr(pv, "views", {})
    if value in views:
        source, memlet = views[value]
        inner = resolve_region(pv, sdfg, source, call, role)
        if inner.subset != subsets.Range.from_array(sdfg.arrays[inner.data]):
            raise CommunicationError(f"{call}: '{role}' is a view of a view; pass a slice of the array itself.")
        return Region(inner.data, memlet.subset)
    desc = sdfg.arrays[value]
    if isinstance(desc, dt.Scalar) and desc.transient:
        found = _index_copy(sdfg, value)
        if found is not None:
            state, edge = found
            subset = memlets.read_subset(state, edge)
            _remove_index_copy(sdfg, state, edge)
            return Region(edge.src.data, subset)
    return Region(value, subsets.Range.from_array(desc))


def _remove_index_copy(sdfg: dace.SDFG, state, edge) -> None:
    """Drops the scalar copy that the frontend made of an indexed argument: the call uses the element."""
    scalar = edge.dst
    state.remove_edge(edge)
    for node in (edge.src, scalar):
        if state.degree(node) == 0:
            state.remove_node(node)
    if not any(n.data == scalar.data for s in sdfg.states() for n in s.data_nodes()):
        sdfg.remove_data(scalar.data, validate=False)


def scalar_in_memory(sdfg: dace.SDFG, value, call: str, role: str, error=CommunicationError) -> str | None:
    """The container ``value`` names when it is one in ``sdfg`` (it must hold one element: ``error`` otherwise);
    ``None`` when ``value`` names no container."""
    if not (isinstance(value, str) and value in sdfg.arrays):
        return None
    desc = sdfg.arrays[value]
    if desc.total_size != 1:
        raise error(
            f"{call}: '{role}' must be a scalar, got the array '{value}' of shape {desc.shape}. "
            f"Fix: index it ({value}[0])."
        )
    return value


def resolve_value(sdfg: dace.SDFG, value, call: str, role: str) -> tuple[str | None, str | None]:
    """``(expression, None)`` for a constant or symbolic value, ``(None, container)`` for a scalar in memory."""
    if isinstance(value, bool):
        raise CommunicationError(f"{call}: '{role}' must be an integer, got a bool.")
    if isinstance(value, (int, dace.symbolic.SymExpr)) or dace.symbolic.issymbolic(value):
        return str(value), None
    container = scalar_in_memory(sdfg, value, call, role)
    if container is not None:
        return None, container
    if isinstance(value, str) and value in sdfg.symbols:
        return value, None
    raise CommunicationError(f"{call}: '{role}' must be an integer expression or a scalar, got {value!r}.")


def check_flag(sdfg: dace.SDFG, region: Region, call: str) -> None:
    """A flag is one ``uint64`` element of an array that can live on the symmetric heap."""
    desc = sdfg.arrays[region.data]
    if desc.dtype != dace.uint64:
        raise CommunicationError(
            f"{call}: flag '{region}' has dtype {desc.dtype.to_string()}; signals are 64-bit unsigned. "
            f"Fix: declare '{region.data}' as dace.uint64[...] (NumPy: np.uint64)."
        )
    if region.subset.num_elements() != 1:
        raise CommunicationError(
            f"{call}: flag '{region}' covers {region.subset.num_elements()} elements; a flag is one element. "
            f"Fix: index it, e.g. {region.data}[0]."
        )
    if isinstance(desc, dt.Scalar) or desc.storage in _LOCAL_STORAGE:
        raise CommunicationError(
            f"{call}: flag '{region.data}' is not in symmetric memory ({type(desc).__name__}, storage "
            f"{desc.storage.name}): other PEs cannot signal it. Fix: make the flag an array, e.g. "
            f"{region.data}: dace.uint64[1], or a transient array (np.zeros(1, dtype=np.uint64)); "
            "dace-cpufree places it on the symmetric heap."
        )


_LOCAL_STORAGE = (
    dace.StorageType.Register,
    dace.StorageType.GPU_Shared,
    dace.StorageType.CPU_Heap,
    dace.StorageType.CPU_Pinned,
    dace.StorageType.CPU_ThreadLocal,
)


def check_transfer(sdfg: dace.SDFG, dest: Region, src: Region, call: str) -> None:
    """Source and destination of a put agree in shape (after dropping unit dimensions) and dtype."""
    sdesc, ddesc = sdfg.arrays[src.data], sdfg.arrays[dest.data]
    if sdesc.dtype != ddesc.dtype:
        raise CommunicationError(
            f"{call}: 'src' {src} is {sdesc.dtype.to_string()} but 'dest' {dest} is {ddesc.dtype.to_string()}; "
            "a put copies bytes. Fix: give both arrays the same dtype."
        )
    sshape, dshape = src.shape(), dest.shape()
    same = len(sshape) == len(dshape) and all(dace.symbolic.simplify(a - b) == 0 for a, b in zip(sshape, dshape))
    if not same:
        raise CommunicationError(
            f"{call}: 'src' {src} has shape {tuple(sshape)} but 'dest' {dest} has shape {tuple(dshape)}. "
            "Fix: slice both to the same extents (unit dimensions are ignored)."
        )
    for region, role in ((src, "src"), (dest, "dest")):
        if any((s < 0) == True for _, _, s in region.subset.ndrange()):  # noqa: E712 - sympy comparison
            raise CommunicationError(f"{call}: '{role}' {region} has a negative step. Fix: use a positive step.")
