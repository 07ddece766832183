"""Automatic domain decomposition of a single-GPU program (``compile(prog, distribute={"A": 0})``): which arrays
are split and how they align, the halo widths, and the owned-block rewrite (see :mod:`dace_cpufree.decomposition`).

Every map that touches a split array is *aligned*: one of its parameters walks the template, shifted by a constant
(its writes of split arrays decide the shift, else its reads). A temporary that an aligned map writes or reads
element-wise along that parameter is split the same way (the frontend's ``A[1:-1] + A[2:]`` temporaries), until
nothing changes. An aligned map then runs over the owned part of its range only; the offsets of its reads, relative
to the owned element, are the halo widths. The halo exchanges themselves are placed by :mod:`.halo_exchange`.

Refused, with the array, the access, its line and the fix: an index along the split axis that is not a map
parameter plus a constant (a constant or data-dependent index, a reversed or scaled one), a map or copy whose
split-axis accesses disagree on the shift, a program array written element-wise along the split axis that is not
named in ``distribute``, and any other use of a split array (library calls such as matrix products, nested calls,
tasklets outside maps).
"""

from __future__ import annotations

import dace
import sympy
from dace import nodes, symbolic
from dace.frontend.operations import detect_reduction_type
from dace.sdfg import propagation
from dace_cpufree.frontend.pe import N_PES_SYMBOL, PE_SYMBOL, pe_symbol

from dace_cpufree.bounds import at_least
from dace_cpufree.decomposition import LOCAL_SYMBOL, Split
from dace_cpufree.errors import NotPersistableError

_FIX = (
    "Fix: index the split axis with a map's variable plus a constant (NumPy slices such as A[1:-1], A[2:] do), "
    "distribute along another axis, or leave this array out of distribute (it is then computed on every PE)."
)


def line_text(info) -> str:
    """``file:line`` of a ``DebugInfo`` (``None`` or one without a file: "an unknown line")."""
    return f"{info.filename}:{info.start_line}" if info is not None and info.filename else "an unknown line"


def line_of(node) -> str:
    return line_text(getattr(node, "debuginfo", None))


def _refuse(array: str, access, node, why: str, fix: str = _FIX) -> None:
    raise NotPersistableError(
        f"cannot distribute '{array}': {why} (access {access} at {line_of(node)}). {fix}"
    )


class _Scope:
    """A top-level map of a state: its inner accesses ``(memlet, written)`` and its parameters."""

    def __init__(self, state: dace.SDFGState, entry: nodes.MapEntry):
        self.state, self.entry = state, entry
        graph = state.scope_subgraph(entry, include_entry=True, include_exit=True)
        self.params = {p: n for n in graph.nodes() if isinstance(n, nodes.MapEntry) for p in n.map.params}
        self.accesses = []
        for e in graph.edges():
            if e.data.data is None:
                continue
            self.accesses.append((e.data, isinstance(e.dst, (nodes.MapExit, nodes.AccessNode))))
        self.align: tuple[str, int] | None = None  # (parameter, template index minus parameter)


def _param_offset(expr, params) -> tuple[str, int] | None:
    """``(p, d)`` where ``expr`` is map parameter ``p`` plus the integer ``d``; ``None`` if it is no such thing."""
    expr = symbolic.pystr_to_symbolic(expr) if isinstance(expr, str) else sympy.sympify(expr)
    found = [p for p in params if symbolic.symbol(p) in expr.free_symbols]
    if len(found) != 1:
        return None
    d = sympy.simplify(expr - symbolic.symbol(found[0]))
    return (found[0], int(d)) if d.is_Integer else None


def _index(memlet, axis: int, params, array: str, node) -> tuple[str, int, int]:
    """``(p, first, last)``: the accessed range along ``axis`` as parameter ``p`` plus constant offsets."""
    b, e, s = memlet.subset[axis]
    lo, hi = _param_offset(b, params), _param_offset(e, params)
    if lo is None or hi is None or lo[0] != hi[0] or s != 1:
        index = str(b) if b == e else f"{b}:{e + 1}" + (f":{s}" if s != 1 else "")
        why = f"its index along the split axis {axis} is '{index}', not a map variable plus a constant"
        used = set().union(*(symbolic.pystr_to_symbolic(str(x)).free_symbols for x in (b, e)))
        if not any(symbolic.symbol(p) in used for p in params):
            why += " (a constant index, or a data-dependent one: every PE would need elements another PE owns)"
        _refuse(array, f"{array}[{memlet.subset}]", node, why)
    return lo[0], lo[1], hi[1]


def _free_axis(memlet, param: str, params) -> tuple[int, int] | None:
    """``(axis, d)``: the axis of ``memlet``'s data that ``param`` plus ``d`` indexes, if any."""
    for axis, (b, e, _) in enumerate(memlet.subset):
        found = _param_offset(b, params)
        if found is not None and found[0] == param and b == e:
            return axis, found[1]
    return None


def _scopes(sdfg: dace.SDFG) -> list[_Scope]:
    out = []
    for state in sdfg.states():
        for node in state.scope_children()[None]:
            if isinstance(node, nodes.MapEntry):
                out.append(_Scope(state, node))
    return out


_REDUCING = {"Reduce": None, "Dot": "sum"}  # library nodes that reduce all their input: (name, op or None: its wcr)
#: the Allreduce operation of a write-conflict resolution's reduction type (the ones Allreduce has)
REDUCTION_OPS = {
    dace.dtypes.ReductionType.Sum: "sum",
    dace.dtypes.ReductionType.Max: "max",
    dace.dtypes.ReductionType.Min: "min",
    dace.dtypes.ReductionType.Product: "prod",
}


def partial_reductions(sdfg: dace.SDFG, align: dict) -> list[tuple]:
    """``(state, node, op, arrays)`` of the library reductions (``np.sum``, ``np.dot``, ...) of split arrays over
    their split axis: each PE reduces its owned part, an ``Allreduce`` combines them."""
    found = []
    for state in sdfg.states():
        for node in state.scope_children()[None]:
            kind = type(node).__name__
            if not isinstance(node, nodes.LibraryNode) or kind not in _REDUCING:
                continue
            inputs = [e.data.data for e in state.in_edges(node) if e.data.data in align]
            if not inputs:
                continue
            axes = getattr(node, "axes", None)
            if axes is not None and any(align[d][0] not in axes for d in inputs):
                _refuse(inputs[0], node.label, node, "it is reduced along other axes than the split one, so the "
                        "result would be split too", "Fix: reduce over the split axis as well, or over all axes.")
            op = _REDUCING[kind]
            if op is None:
                op = REDUCTION_OPS.get(detect_reduction_type(node.wcr))
                if op is None:
                    _refuse(inputs[0], node.label, node, "its reduction is not a sum, product, max or min",
                            "Fix: write it as one of those.")
            found.append((state, node, op, inputs))
    return found


def check_other_uses(sdfg: dace.SDFG, align: dict, reductions: list) -> None:
    """Split arrays appear in maps, copies between containers and the ``reductions`` over the split axis
    (:func:`partial_reductions`) only."""
    reducing = {node for _, node, _, _ in reductions}
    for state in sdfg.states():
        top = state.scope_children()[None]
        for node in top:
            if isinstance(node, (nodes.MapEntry, nodes.MapExit, nodes.AccessNode)) or node in reducing:
                continue
            for e in state.all_edges(node):
                if e.data.data in align:
                    kind = type(node).__name__
                    _refuse(
                        e.data.data,
                        f"{e.data.data}[{e.data.subset}]",
                        node if getattr(node, "debuginfo", None) else e.src,
                        f"a {kind} ({node.label}) uses it whole; only maps and slice copies can be split",
                        "Fix: write that operation with slices and element-wise NumPy, or leave the array out of "
                        "distribute (a whole-array product over the split axis cannot be distributed).",
                    )
    for edge in sdfg.all_interstate_edges():
        used = {str(s) for s in edge.data.free_symbols} & set(align)
        if used:
            name = sorted(used)[0]
            _refuse(name, edge.data.assignments or edge.data.condition.as_string, edge.src, "control flow reads it")


def _copies(sdfg: dace.SDFG):
    for state in sdfg.states():
        for e in state.edges():
            if isinstance(e.src, nodes.AccessNode) and isinstance(e.dst, nodes.AccessNode) and e.data.data:
                yield state, e


def _copy_subsets(e):
    """``(source subset, destination subset)`` of a copy edge between containers."""
    m = e.data
    if m.data == e.src.data:
        return m.subset, (m.other_subset if m.other_subset is not None else m.subset)
    return (m.other_subset if m.other_subset is not None else m.subset), m.subset


def align_arrays(sdfg: dace.SDFG, named: dict[str, int]) -> tuple[dict, list[_Scope]]:
    """``({array: (axis, offset)}, aligned scopes)``: the named arrays, the temporaries aligned with them, and every
    map that touches them with its parameter and shift."""
    align = {name: (axis, 0) for name, axis in named.items()}
    scopes = _scopes(sdfg)

    def note(array, axis, offset, node, access):
        if array in align:
            if align[array] != (axis, offset):
                _refuse(array, access, node, f"it is used with two different alignments {align[array]} and "
                        f"{(axis, offset)} (a temporary reused for shifted slices)")
            return False
        if not sdfg.arrays[array].transient:
            _refuse(array, access, node, "it is written element-wise from split data but is not split itself",
                    f"Fix: add '{array}' to distribute (along axis {axis}).")
        align[array] = (axis, offset)
        return True

    for from_reads in (False, True):
        changed = True
        while changed:
            changed = False
            for sc in scopes:
                if sc.align is None:
                    for memlet, written in sorted(sc.accesses, key=lambda a: not a[1]):
                        if memlet.data in align and (written or from_reads):
                            axis, c = align[memlet.data]
                            p, first, _ = _index(memlet, axis, sc.params, memlet.data, sc.entry)
                            sc.align = (p, first + c)
                            changed = True
                            break
                if sc.align is None:
                    continue
                p, c = sc.align
                for memlet, written in sc.accesses:
                    if memlet.data in align:
                        axis, off = align[memlet.data]
                        q, first, _ = _index(memlet, axis, sc.params, memlet.data, sc.entry)
                        if q != p or (written and first + off != c):
                            _refuse(memlet.data, f"{memlet.data}[{memlet.subset}]", sc.entry,
                                    "the map writes the split axis at different shifts (or along another variable)")
                        continue
                    found = _free_axis(memlet, p, sc.params)
                    if found is not None and (written or sdfg.arrays[memlet.data].transient):
                        access = f"{memlet.data}[{memlet.subset}]"
                        changed |= note(memlet.data, found[0], c - found[1], sc.entry, access)
            for _, e in _copies(sdfg):
                src, dst = _copy_subsets(e)
                ends = [(e.src.data, src), (e.dst.data, dst)]
                known = [(d, s) for d, s in ends if d in align]
                if not known or len(src) != len(dst):
                    continue
                d0, s0 = known[0]
                axis, off = align[d0]
                for d, s in ends:
                    if d not in align:
                        changed |= note(d, axis, off + int(s0[axis][0] - s[axis][0]), e.src, f"{d}[{s}]")
    return align, [sc for sc in scopes if sc.align is not None]


def halo_widths(sdfg: dace.SDFG, align: dict, scopes: list[_Scope]) -> tuple[dict[str, tuple[int, int]], set]:
    """``({array: (lower, upper)}, {(map entry, array)})``: how far below and above the owned block the aligned maps
    read, and which maps read beyond it (their halo)."""
    widths = {name: (0, 0) for name in align}
    beyond = set()
    for sc in scopes:
        p, c = sc.align
        for memlet, written in sc.accesses:
            if memlet.data in align and not written:
                axis, off = align[memlet.data]
                _, first, last = _index(memlet, axis, sc.params, memlet.data, sc.entry)
                below, above = c - (first + off), last + off - c
                lo, hi = widths[memlet.data]
                widths[memlet.data] = (max(lo, below), max(hi, above))
                if below > 0 or above > 0:
                    beyond.add((sc.entry, memlet.data))
    return widths, beyond


def split_arrays(
    sdfg: dace.SDFG, align: dict, scopes: list[_Scope], reductions: list, widths: dict, named: dict[str, int], extent
) -> tuple[Split, ...]:
    """The owned-block rewrite: local shapes, shifted accesses, aligned maps, copies and the ``reductions``' inputs
    (:func:`partial_reductions`) over the owned range."""
    local = symbolic.symbol(LOCAL_SYMBOL, dace.int64)
    if LOCAL_SYMBOL not in sdfg.symbols:
        sdfg.add_symbol(LOCAL_SYMBOL, dace.int64)
    pe_symbol(sdfg, N_PES_SYMBOL)
    lo = pe_symbol(sdfg, PE_SYMBOL) * local
    hi = sympy.Min(lo + local, extent)
    for sc in scopes:
        p, c = sc.align
        owner = sc.params[p]
        k = owner.map.params.index(p)
        b, e, s = owner.map.range[k]
        if s != 1:
            _refuse(next(m.data for m, _ in sc.accesses if m.data in align), f"{p} in {b}:{e + 1}:{s}", sc.entry,
                    "the map along the split axis takes steps of more than one element")
        _check_inside(sc, align, b + c, e + c, extent)
        owner.map.range[k] = (sympy.Max(b, lo - c), sympy.Min(e, hi - 1 - c), s)
    for _, e in _copies(sdfg):
        _clamp_copy(e, align, lo, hi)
    for state, node, _, _ in reductions:
        for e in state.in_edges(node):
            if e.data.data in align:
                axis, off = align[e.data.data]
                b, last, st = e.data.subset[axis]
                e.data.subset[axis] = (sympy.Max(b, lo - off), sympy.Min(last, hi - 1 - off), st)
    for name, (axis, _) in align.items():
        desc = sdfg.arrays[name]
        lower, upper = widths[name]
        shape = list(desc.shape)
        shape[axis] = local + lower + upper
        desc.set_shape(shape)
    for state in sdfg.states():
        for e in state.edges():
            _shift(e, align, widths, lo)
        propagation.propagate_memlets_state(sdfg, state)
    return tuple(
        Split(name, axis, off, *widths[name], name in named, str(tuple(sdfg.arrays[name].shape)))
        for name, (axis, off) in sorted(align.items())
    )


def _check_inside(sc: _Scope, align: dict, first, last, extent) -> None:
    """An aligned map's template indices ``first .. last`` do not provably reach beyond the split axis (0 to
    ``extent - 1``): a map that does (a temporary longer than the named arrays, such as a Laplacian over
    ``in_field[1:I + 3]`` beside an output of ``I`` rows) would have those elements computed by no PE."""
    first, last, extent = (symbolic.pystr_to_symbolic(str(v)) for v in (first, last, extent))  # one symbol per name
    if not at_least(-1, first) and not at_least(last, extent):  # refused where reaching beyond is proven
        return
    array = next((m.data for m, written in sc.accesses if m.data in align and written), None)
    array = array or next(m.data for m, _ in sc.accesses if m.data in align)
    _refuse(
        array,
        f"{array} along the split axis at {first} .. {last}",
        sc.entry,
        f"it reaches beyond the split axis's {extent} elements (0 .. {extent - 1}), which no PE would compute",
        "Fix: also name the longer arrays it is computed from (with the same length on the split axis), or distribute "
        "along an axis where every array has the same length.",
    )


def _clamp_copy(e, align: dict, lo, hi) -> None:
    src, dst = _copy_subsets(e)
    name = e.dst.data if e.dst.data in align else e.src.data
    if name not in align:
        return
    axis, off = align[name]
    anchor = dst if name == e.dst.data else src
    b, last, _ = anchor[axis]
    nb, nlast = sympy.Max(b, lo - off), sympy.Min(last, hi - 1 - off)
    for s in (src, dst):
        sb, sl, st = s[axis]
        s[axis] = (sb + (nb - b), sl + (nlast - last), st)


def _shift(e, align: dict, widths: dict, lo) -> None:
    """Global indices of split arrays made local: ``j + offset - pe * local + lower``."""
    m = e.data
    if m.data is None:
        return
    ends = [(m.data, m.subset)]
    if m.other_subset is not None:
        other = e.dst.data if isinstance(e.dst, nodes.AccessNode) and e.dst.data != m.data else (
            e.src.data if isinstance(e.src, nodes.AccessNode) else None)
        if other is not None:
            ends.append((other, m.other_subset))
    for name, subset in ends:
        if name in align and subset is not None:
            axis, off = align[name]
            delta = off + widths[name][0] - lo
            b, last, s = subset[axis]
            subset[axis] = (b + delta, last + delta, s)
