"""``np.argmax`` / ``np.argmin`` inside the persistent kernel.

DaCe reduces ``(value, index)`` structs (``_val_and_idx``) with a write-conflict resolution that no device atomic
can apply. Each such reduction becomes two that can, over the same map and with a grid sync between them:

1. ``key = max(key(A[i]))`` (``min`` for argmin): ``key`` (``cpufree::arg_key``, ``cpufree/math.cuh``) is an int64
   whose order is the values' order, with NaN above every number for argmax and below for argmin (NumPy returns
   the first NaN) and -0.0 equal to 0.0;
2. ``index = min(i where key(A[i]) == key)``: the first index of the extreme value, as NumPy returns it.

The struct's readers (``s[k].idx`` on an interstate edge, ``s.idx`` in a tasklet) read the index array instead.
Applied before the persistence checks; any other struct reduction is still refused there.
"""

from __future__ import annotations

import ast
import copy
import re

import dace
from dace import data as dt
from dace.properties import CodeBlock
from dace.sdfg import nodes

#: The fields of DaCe's argmax/argmin struct.
FIELDS = {"idx", "val"}


def _is_pair(desc: dt.Data) -> bool:
    return (
        isinstance(desc, dt.Array) and isinstance(desc.dtype, dace.dtypes.struct) and set(desc.dtype.fields) == FIELDS
    )


def _kind(wcr: str) -> str | None:
    """``"max"`` (argmax) or ``"min"`` (argmin) from DaCe's combine lambda of the struct."""
    compact = wcr.replace(" ", "")
    for kind in ("max", "min"):
        if f"{kind}(x.val,y.val)" in compact:
            return kind
    return None


def _index_expr(tasklet: nodes.Tasklet) -> str | None:
    """The ``idx=`` argument of ``__out = _val_and_idx(idx=..., val=...)``."""
    try:
        tree = ast.parse(tasklet.code.as_string)
    except SyntaxError:
        return None
    for sub in ast.walk(tree):
        if isinstance(sub, ast.Call) and getattr(sub.func, "id", "") == "_val_and_idx":
            for kw in sub.keywords:
                if kw.arg == "idx":
                    return ast.unparse(kw.value)
    return None


def split_arg_reductions(sdfg: dace.SDFG) -> int:
    """Rewrites every argmax/argmin struct reduction of ``sdfg`` (nested SDFGs too); returns how many."""
    done = 0
    for sd in sdfg.all_sdfgs_recursive():
        for name, desc in list(sd.arrays.items()):
            if desc.transient and _is_pair(desc) and _split(sd, name):
                done += 1
    return done


def _writers(sd: dace.SDFG, name: str):
    """``(state, tasklet, edge)`` of every tasklet that writes the struct, through its map exit if any."""
    for state in sd.states():
        for node in state.nodes():
            if isinstance(node, nodes.Tasklet):
                for e in state.out_edges(node):
                    if e.data.data == name:
                        yield state, node, e


def _split(sd: dace.SDFG, name: str) -> bool:
    writers = list(_writers(sd, name))
    reduces = [(s, t, e) for s, t, e in writers if e.data.wcr is not None]
    inits = [(s, t, e) for s, t, e in writers if e.data.wcr is None]
    if len(reduces) != 1 or not inits:
        return False
    state, reduce, out_edge = reduces[0]
    kind = _kind(str(out_edge.data.wcr))
    index = _index_expr(reduce)
    ins = [e for e in state.in_edges(reduce) if not e.data.is_empty()]
    if kind is None or index is None or len(ins) != 1 or state.entry_node(reduce) is None:
        return False  # not the map DaCe makes of np.argmax/np.argmin: left to the persistence check's refusal
    desc = sd.arrays[name]
    key, idx = f"{name}_key", f"{name}_index"
    for new in (key, idx):
        sd.add_array(new, desc.shape, dace.int64, storage=desc.storage, transient=True, find_new_name=False)
    nan_high = "true" if kind == "max" else "false"
    first = "LLONG_MIN" if kind == "max" else "LLONG_MAX"

    # the start values: the key's identity and "no index yet"
    for init_state, init, edge in inits:
        init.code = CodeBlock(f"{edge.src_conn} = {first};\n__init_index = LLONG_MAX;", dace.Language.CPP)
        init.add_out_connector("__init_index", dace.int64)
        _retarget(init_state, edge, key, idx, init, "__init_index")

    # 1: the extreme key, combined with max/min
    in_conn = ins[0].dst_conn
    reduce.code = CodeBlock(f"__out = cpufree::arg_key<{nan_high}>({in_conn});", dace.Language.CPP)
    reduce.out_connectors = {"__out": dace.int64}
    key_node = _rename_path(state, out_edge, key, f"lambda a, b: {kind}(a, b)")

    # 2: the first index whose key is the extreme one, combined with min, in a copy of the map reading the key
    _index_pass(state, reduce, ins[0], out_edge, key_node, idx, index, nan_high)
    _readers(sd, name, idx)
    if not any(n.data == name for st in sd.states() for n in st.data_nodes()):
        sd.remove_data(name, validate=False)
    return True


def _rename_path(state: dace.SDFGState, edge, new: str, wcr: str | None):
    """Points the memlet path of ``edge`` (tasklet -> exits -> access node) at container ``new``; returns the
    access node."""
    path = state.memlet_path(edge)
    for e in path:
        e.data.data = new
        if wcr is not None and e.data.wcr is not None:
            e.data.wcr = wcr
    node = path[-1].dst
    node.data = new
    return node


def _retarget(state: dace.SDFGState, edge, key: str, idx: str, tasklet: nodes.Tasklet, conn: str) -> None:
    """The init tasklet writes the key's start value where it wrote the struct, and the index's beside it."""
    path = state.memlet_path(edge)
    subsets = [copy.deepcopy(e.data.subset) for e in path]
    _rename_path(state, edge, key, None)
    access = state.add_access(idx)
    src, src_conn = tasklet, conn
    for e, subset in zip(path, subsets):
        dst = e.dst if e is not path[-1] else access
        dst_conn = None
        if isinstance(dst, nodes.ExitNode):
            dst_conn = f"IN_{idx}"
            dst.add_in_connector(dst_conn)
            dst.add_out_connector(f"OUT_{idx}")
        state.add_edge(src, src_conn, dst, dst_conn, dace.Memlet(data=idx, subset=subset))
        src, src_conn = dst, (f"OUT_{idx}" if isinstance(dst, nodes.ExitNode) else None)


def _index_pass(state, reduce, in_edge, out_edge, key_node, idx: str, index: str, nan_high: str) -> None:
    """A copy of the reduction's map whose tasklet keeps the index of each element holding the extreme key."""
    entry = state.entry_node(reduce)
    new_map = copy.deepcopy(entry.map)
    new_map.label = f"{entry.map.label}_index"
    new_entry, new_exit = nodes.MapEntry(new_map), nodes.MapExit(new_map)
    state.add_nodes_from([new_entry, new_exit])
    code = f"__out = (cpufree::arg_key<{nan_high}>(__in) == __key) ? (long long)({index}) : LLONG_MAX;"
    value_type = state.sdfg.arrays[in_edge.data.data].dtype
    tasklet = state.add_tasklet(
        f"{reduce.label}_index",
        {"__in": value_type, "__key": dace.int64},
        {"__out": dace.int64},
        code,
        dace.Language.CPP,
    )
    # the element, from where the reduction reads it
    source = state.memlet_path(in_edge)[0]
    state.add_memlet_path(
        source.src, new_entry, tasklet, dst_conn="__in", memlet=copy.deepcopy(in_edge.data), propagate=True
    )
    key_memlet = copy.deepcopy(out_edge.data)
    key_memlet.data = key_node.data
    key_memlet.wcr = None
    state.add_memlet_path(key_node, new_entry, tasklet, dst_conn="__key", memlet=key_memlet, propagate=True)
    idx_memlet = copy.deepcopy(out_edge.data)
    idx_memlet.data = idx
    idx_memlet.wcr = "lambda a, b: min(a, b)"
    out = state.add_access(idx)
    state.add_memlet_path(tasklet, new_exit, out, src_conn="__out", memlet=idx_memlet, propagate=True)
    # readers of the struct in this state now read the index
    for e in list(state.out_edges(key_node)):
        if e.dst is not new_entry:
            moved = state.add_edge(out, None, e.dst, e.dst_conn, copy.deepcopy(e.data))
            state.remove_edge(e)
            _read_index(state, moved, idx)


def _read_index(state: dace.SDFGState, edge, idx: str) -> None:
    """The memlet tree from ``edge`` reads ``idx``; a tasklet at its end takes the index (``c.idx`` -> ``c``)."""
    for sub in state.memlet_tree(edge):
        sub.data.data = idx
        if isinstance(sub.dst, nodes.Tasklet) and sub.dst_conn:
            conn = sub.dst_conn
            text = re.sub(rf"\b{re.escape(conn)}\.idx\b", conn, sub.dst.code.as_string)
            sub.dst.code = CodeBlock(text, sub.dst.code.language)
            sub.dst.in_connectors[conn] = dace.int64


def _readers(sd: dace.SDFG, name: str, idx: str) -> None:
    """What read ``name[...].idx`` reads ``idx[...]``."""
    pattern = re.compile(rf"\b{re.escape(name)}\[([^\]]*)\]\.idx\b")
    for edge in sd.all_interstate_edges():
        for k, v in list(edge.data.assignments.items()):
            edge.data.assignments[k] = pattern.sub(rf"{idx}[\1]", v)
    for state in sd.states():
        for node in state.data_nodes():
            if node.data == name:
                node.data = idx
                for e in state.out_edges(node):
                    _read_index(state, e, idx)
