"""Per-thread code of a scope: what runs inside one iteration of a map (tasklets, nested maps as loops, copies),
write-conflict resolution by ownership or atomics, and the element-wise copy loops shared with grid-wide copies."""

import ast

import dace
from dace import dtypes, subsets
from dace.sdfg import nodes
from dace.sdfg.state import SDFGState

from dace_cpufree import memlets
from dace_cpufree.cpp import INDEX_T, cexpr, indent
from dace_cpufree.errors import NotPersistableError

from .context import KernelContext, is_view_edge
from .expressions import same_value, subset_offset, tasklet_code, wcr_op
from .loops import decode_flat, nested_loops
from .nested import nested_code


class ScopeWriter:
    """Writes the sequential code of a scope's contents for one thread.

    :param owned: map parameters that the enclosing grid-stride loop distributes over threads;
                  a WCR write to a location that determines all of them is owned by this thread.
    :param sinks: WCR outputs redirected to register accumulators, ``{(tasklet, conn): (var, op, flag)}``;
                  with a flag, the update takes the value as is while the flag is false.
    """

    def __init__(self, ctx: KernelContext, state: SDFGState, owned: list[str], sinks=None):
        self.ctx = ctx
        self.state = state
        self.sdict = state.scope_dict()
        self.owned = owned
        self.sinks = sinks or {}

    def scope(self, entry: nodes.MapEntry | None) -> list[str]:
        lines = []
        for node in topological(self.state, self.sdict, entry):
            if isinstance(node, nodes.Tasklet):
                lines += self.tasklet(node)
            elif isinstance(node, nodes.MapEntry):
                lines += self.sequential_map(node)
            elif isinstance(node, nodes.AccessNode):
                # Copies into this node (from a container or from outside the scope) and out of the scope.
                for edge in self.state.in_edges(node):
                    if is_view_edge(self.ctx.sdfg, self.state, edge):
                        continue
                    if isinstance(edge.src, (nodes.AccessNode, nodes.MapEntry)) and not edge.data.is_empty():
                        lines += sequential_copy(self.ctx, self.state, edge, self.owned)
                for edge in self.state.out_edges(node):
                    if isinstance(edge.dst, nodes.MapExit) and not edge.data.is_empty():
                        lines += sequential_copy(self.ctx, self.state, edge, self.owned)
            elif isinstance(node, nodes.NestedSDFG):
                lines += nested_code(self, node)
            elif isinstance(node, nodes.MapExit):
                continue
            else:
                raise NotPersistableError(
                    f"node '{node}' ({type(node).__name__}) inside map '{entry}' cannot run in a persistent kernel."
                )
        return lines

    def sequential_map(self, entry: nodes.MapEntry) -> list[str]:
        return nested_loops(entry.map.params, list(entry.map.range), self.scope(entry))

    def tasklet(self, node: nodes.Tasklet) -> list[str]:
        ctx, state = self.ctx, self.state
        pre, post, defined = [], [], {}
        for edge in state.in_edges(node):
            if edge.data.is_empty() or edge.dst_conn is None:
                continue
            ctype = _typed(node.in_connectors[edge.dst_conn], ctx, edge.data)
            defined[edge.dst_conn] = ctype
            if is_pointer(ctype) and edge.dst_conn in node.out_connectors:
                continue  # read and written through one pointer (C of a product): bound as the output
            pre.append(self._bind_input(edge, ctype))
        for edge in state.out_edges(node):
            if edge.data.is_empty() or edge.src_conn is None:
                continue
            conn, ctype = edge.src_conn, _typed(node.out_connectors[edge.src_conn], ctx, edge.data)
            defined[conn] = ctype
            if is_pointer(ctype):
                target = ctx.access(edge.data.data, edge.data.subset)
                if _assigned_as_value(node, conn, edge.data):
                    # a conditional write (``A[A <= t] = v``: DaCe gives the dynamic output a pointer type while
                    # the code assigns the element): a reference makes the assignment store to the element
                    ref = "auto " if ctx.race_check else f"{ctype.base_type.ctype} &"  # race: a recorded element
                    pre.append(f"{ref}{conn} = {target};")
                else:
                    pre.append(f"{'auto' if ctx.race_check else ctype.ctype} {conn} = &{target};")
                continue
            pre.append(f"{ctype.ctype} {conn};")
            post.append(self._write_output(node, edge, conn))
        body = tasklet_code(node, defined).splitlines()
        return ["{"] + indent(pre + body + post) + ["}"]

    def _bind_input(self, edge, ctype) -> str:
        memlet = edge.data
        if is_pointer(ctype):
            target = self.ctx.access(memlet.data, memlet.subset)
            return f"{'auto' if self.ctx.race_check else ctype.ctype} {edge.dst_conn} = &{target};"
        return self.ctx.read(edge.dst_conn, ctype.ctype, memlet.data, memlet.subset)

    def _write_output(self, node, edge, conn: str, value: str | None = None) -> str:
        """The store of output ``conn`` of ``node`` (its value: the variable ``value``, by default ``conn``)."""
        memlet = edge.data
        value = value or conn
        if (node, conn) in self.sinks:
            var, op, started = self.sinks[(node, conn)]
            update = f"cpufree::combine<{op}>({var}, {value})"
            return f"{var} = {started} ? {update} : {value};" if started else f"{var} = {update};"
        target = self.ctx.access(memlet.data, memlet.subset)
        if memlet.wcr is None:
            return f"{target} = {value};"
        op = wcr_op(memlet.wcr)
        if self.ctx.thread_owned(memlet.data, memlet.subset, self.owned):
            return f"{target} = cpufree::combine<{op}>({target}, {value});"
        return f"cpufree::atomic_combine<{op}>(&{target}, {value});"


def _typed(ctype, ctx, memlet):
    """A connector's type; where DaCe left it untyped (a tasklet a transformation copied into a nested SDFG after
    type inference), the element type of the container its memlet reads or writes, as DaCe's inference gives."""
    if ctype is not None and ctype.type is not None:
        return ctype
    return ctx.sdfg.arrays[memlet.data].dtype


def _assigned_as_value(node: nodes.Tasklet, conn: str, memlet) -> bool:
    """Whether a Python tasklet writes its one-element output ``conn`` by plain assignment (never indexes it)."""
    if node.language != dtypes.Language.Python or memlet.subset is None or memlet.subset.num_elements() != 1:
        return False
    tree = node.code.code if isinstance(node.code.code, list) else [node.code.code]
    for stmt in tree:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == conn:
                return False
    return True


def is_pointer(ctype) -> bool:
    return isinstance(ctype, dace.pointer)


def topological(state: SDFGState, sdict, entry):
    return [n for n in dace.sdfg.utils.dfs_topological_sort(state) if sdict[n] is entry]


def scope_accesses(ctx: KernelContext, state: SDFGState, node) -> tuple[frozenset, frozenset]:
    """Device containers read and written by a top-level node (a map scope, a tasklet)."""
    if isinstance(node, nodes.MapEntry):
        exit_node = state.exit_node(node)
        edges = list(state.in_edges(node)) + state.scope_subgraph(node).edges() + list(state.out_edges(exit_node))
    else:
        edges = state.all_edges(node)
    reads, writes = set(), set()
    for e in edges:
        if e.data.is_empty():
            continue
        if isinstance(e.src, nodes.AccessNode) and isinstance(e.dst, nodes.AccessNode):
            reads.add(e.src.data)
            writes.add(e.dst.data)
        elif isinstance(e.dst, (nodes.AccessNode, nodes.MapExit)) or (
            e.src is node and isinstance(node, nodes.Tasklet)
        ):
            writes.add(e.data.data)
        else:
            reads.add(e.data.data)
    device = ctx.device
    return frozenset(reads & device), frozenset(writes & device)


def _unflatten(tag: str, flat: str, sizes: list, dividers=None) -> list[str]:
    """C++ lines that decode element ``flat`` (row-major) of a box of ``sizes`` into digits ``__{tag}{k}``
    (:func:`decode_flat`: 32-bit when the sizes are constants whose product fits in 31 bits; through the
    kernel's prepared ``dividers`` where they hold a size)."""
    digits = [f"__{tag}{k}" for k in range(len(sizes))]
    ranges = [(0, size - 1, 1) for size in sizes]
    return decode_flat(flat, f"__{tag}", digits, ranges, [f"({cexpr(size)})" for size in sizes], dividers)


def _index(tag: str, sub: subsets.Subset) -> list:
    """Symbolic indices of ``sub`` from the digits ``__{tag}{k}``."""
    return [dace.symbolic.pystr_to_symbolic(f"({b}) + __{tag}{k} * ({s})") for k, (b, _, s) in enumerate(sub.ndrange())]


def copy_body(ctx: KernelContext, state: SDFGState, edge, flat: str, owned: list[str] | None) -> tuple[list[str], str]:
    """Body of an element-wise copy loop over ``flat``, and the element count."""
    src, src_sub, dst, dst_sub = memlets.ends(state, edge)
    n = cexpr(src_sub.num_elements())
    if src_sub.num_elements() == 1 and dst_sub.num_elements() == 1:
        src_expr, dst_expr = ctx.access(src, src_sub), ctx.access(dst, dst_sub)
        lines = []
    elif _linear_run(ctx, src, src_sub) and _linear_run(ctx, dst, dst_sub):
        # both ends one run of memory in row-major order: element f is at the first one's offset + f (no division)
        arrays = ctx.sdfg.arrays
        src_expr = f"{src}[{subset_offset(arrays[src], src_sub)} + {flat}]"
        dst_expr = f"{dst}[{subset_offset(arrays[dst], dst_sub)} + {flat}]"
        lines = []
    else:
        same = len(src_sub) == len(dst_sub) and all(
            same_value(a, b) for a, b in zip(src_sub.size(), dst_sub.size())
        )  # one decode serves both ends
        dividers = ctx.loop_dividers(state)
        src_digits = _unflatten("s", flat, src_sub.size(), dividers)
        lines = src_digits + ([] if same else _unflatten("d", flat, dst_sub.size(), dividers))
        src_expr = ctx.element(src, _index("s", src_sub))
        dst_expr = ctx.element(dst, _index("s" if same else "d", dst_sub))
    wcr = edge.data.wcr
    if wcr is None:
        return lines + [f"{dst_expr} = {src_expr};"], n
    op = wcr_op(wcr)
    if owned is not None and ctx.thread_owned(dst, dst_sub, owned):
        return lines + [f"{dst_expr} = cpufree::combine<{op}>({dst_expr}, {src_expr});"], n
    return lines + [f"cpufree::atomic_combine<{op}>(&{dst_expr}, {src_expr});"], n


def whole_run_copy(ctx: KernelContext, state: SDFGState, edge) -> tuple[list[str], str] | None:
    """A grid-wide copy between two different containers whose ends are each one run of memory: one call of every
    thread, ``cpufree::copy_run`` (16-byte vectors where both runs are equally aligned, several loads in flight per
    thread: the element loop kept one, which at two blocks of 128 threads per multiprocessor left NPBench's doitgen
    copy latency-bound). The code and the element count; ``None`` where the element loop stays: one element, a
    write-conflict resolution, views (which may alias), the race checker (which records each element's access)."""
    src, src_sub, dst, dst_sub = memlets.ends(state, edge)
    if edge.data.wcr is not None or ctx.race_check or src == dst or src in ctx.views or dst in ctx.views:
        return None
    if src_sub.num_elements() == 1 or not (_linear_run(ctx, src, src_sub) and _linear_run(ctx, dst, dst_sub)):
        return None
    arrays = ctx.sdfg.arrays
    if arrays[src].dtype != arrays[dst].dtype:
        return None
    n = cexpr(src_sub.num_elements())
    first_src = f"{src} + ({subset_offset(arrays[src], src_sub)})"
    first_dst = f"{dst} + ({subset_offset(arrays[dst], dst_sub)})"
    return [f"cpufree::copy_run({first_dst}, {first_src}, (long long)({n}), __tid, __nthreads);"], n


def _linear_run(ctx: KernelContext, name: str, sub: subsets.Subset) -> bool:
    """Whether the elements of ``name[sub]``, taken in row-major order, lie one after another in memory: DaCe's
    contiguous subset (``Range.is_contiguous_subset``: unit steps, a one-dimensional slice of stride 1 or a contiguous
    part of a packed array), with a packed array's layout row-major where more than one dimension is longer than one
    (a column-major one is contiguous in the other order)."""
    desc = ctx.sdfg.arrays[name]
    if name in ctx.private or not isinstance(desc, dace.data.Array) or not isinstance(sub, subsets.Range):
        return False
    long_dims = sum(1 for size in sub.size() if (size == 1) != True)  # noqa: E712 (sympy)
    return bool(sub.is_contiguous_subset(desc)) and (long_dims <= 1 or bool(desc.is_packed_c_strides()))


def sequential_copy(ctx: KernelContext, state: SDFGState, edge, owned: list[str]) -> list[str]:
    body, n = copy_body(ctx, state, edge, "__c", owned)
    if n == "1":
        return ["{"] + indent(body) + ["}"]
    return [f"for ({INDEX_T} __c = 0; __c < {n}; ++__c) {{"] + indent(body) + ["}"]
