"""A nested SDFG inside a map as the sequential code of the thread that runs the map's iteration.

DaCe keeps a data-dependent ``if``, a ``while`` on array values or a masked update inside a ``dace.map`` as a
nested SDFG that cannot be inlined. Each iteration of the map runs on one thread, so the nested SDFG is one
thread's code: its arrays are pointers into the memory its connectors name, its scalars and transients are
registers, its symbols are locals (those of the symbol mapping initialised from the outer expressions), and its
control flow (states, branches, loops) is printed as C++ statements. Reads and writes reach the kernel's sync
analysis through the enclosing map's memlets, as for any other code inside the map.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import dace
from dace import data as dt
from dace import subsets
from dace.sdfg import nodes
from dace.sdfg.state import (
    BreakBlock,
    ConditionalBlock,
    ContinueBlock,
    ControlFlowRegion,
    LoopRegion,
    SDFGState,
)

from dace_cpufree.cpp import cexpr, indent
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.vocabulary import block_order

from .context import KernelContext, pointer_type, symbol_ctype
from .expressions import interstate_code, wcr_op


@dataclass
class NestedContext(KernelContext):
    """The data of a nested SDFG as one thread sees it: ``bound`` arrays are pointers into the outer memory,
    every other container (scalar connectors, transients) is the thread's own."""

    parent: KernelContext | None = None
    bound: set = field(default_factory=set)

    def __post_init__(self):
        pass  # no kernel arguments: the containers are classified by nested_code

    @property
    def device(self) -> set[str]:
        return set(self.bound)

    def fresh(self, prefix: str) -> str:
        return self.parent.fresh(prefix)  # names unique in the whole kernel

    def access(self, name: str, subset) -> str:
        if isinstance(self.sdfg.arrays[name], dt.Scalar):
            return name
        return super().access(name, subset)

    def element(self, name: str, index: list) -> str:
        if isinstance(self.sdfg.arrays[name], dt.Scalar):
            return name
        return super().element(name, index)

    def thread_owned(self, name: str, subset, owned: list[str]) -> bool:
        # the bound arrays are the kernel's memory, which other threads' iterations write too (a histogram)
        return name not in self.bound and super().thread_owned(name, subset, owned)


def nested_code(writer, node: nodes.NestedSDFG) -> list[str]:
    """C++ block of ``node`` (inside a map scope of ``writer``'s state) for the thread that runs it.

    :param writer: the ``scopes.ScopeWriter`` of the enclosing scope; writers of its class print the inner states.
    """
    outer, state = writer.ctx, writer.state
    # the inner names, prefixed: they are often the outer ones (A for A), which the binding would shadow
    prefix = outer.fresh("n") + "_"
    inner = copy.deepcopy(node.sdfg)
    rename = {name: prefix + name for name in list(inner.arrays) + list(inner.symbols)}
    inner.replace_dict(rename)
    ctx = NestedContext(inner, race_check=outer.race_check, parent=outer)
    pre, post, declared = [], [], set()
    for sym, value in sorted(node.symbol_mapping.items()):
        pre.append(f"const {symbol_ctype(inner, rename[sym])} {rename[sym]} = {cexpr(value)};")
    for edge in list(state.in_edges(node)) + list(state.out_edges(node)):
        if edge.data.is_empty():
            continue
        original = edge.dst_conn if edge.dst is node else edge.src_conn
        name = rename[original]
        desc = inner.arrays[name]
        window = _window(outer.sdfg.arrays[edge.data.data], node, original, edge.data.subset)
        target = outer.access(edge.data.data, window)
        if isinstance(desc, dt.Scalar):
            if name not in declared:  # declared once, with the value it starts from
                pre.append(f"{desc.dtype.ctype} {name} = {_start(edge, node, target, desc)};")
                declared.add(name)
            if edge.src is node:  # the value leaves as the node's output (a reduction: combined or atomic)
                post.append(writer._write_output(node, edge, original, name))
        elif name not in declared:
            ctx.bound.add(name)
            declared.add(name)
            pre.append(f"{pointer_type(desc.dtype.ctype, outer.race_check)}{name} = &{target};")
    for name, desc in sorted(inner.arrays.items()):
        if not desc.transient:
            continue
        if isinstance(desc, dt.Scalar):
            pre.append(f"{desc.dtype.ctype} {name};")
        elif isinstance(desc, dt.Array) and not isinstance(desc, dt.View):
            if dace.symbolic.issymbolic(desc.total_size):
                raise NotPersistableError(
                    f"'{name}' in '{node.label}' has a size that depends on values ({desc.total_size}); a thread's "
                    "arrays need a constant size. Fix: give it a constant size."
                )
            ctx.local.add(name)
            pre.append(f"{desc.dtype.ctype} {name}[{cexpr(desc.total_size)}];")
        else:
            raise NotPersistableError(f"'{name}' in '{node.label}' is a {type(desc).__name__}. Fix: use arrays.")
    mapped = {rename[sym] for sym in node.symbol_mapping}
    for sym in sorted(inner.symbols):
        if sym not in mapped:
            pre.append(f"{symbol_ctype(inner, sym)} {sym};")
    body = _Printer(ctx, type(writer)).region(inner)
    return ["{"] + indent(pre + body + post) + ["}"]


def _start(edge, node, target: str, desc: dt.Scalar) -> str:
    """The value a scalar connector starts from: its input; for an output that a reduction combines outward, the
    operator's identity (a branch that does not contribute adds nothing); for a plain output, the outer value
    (a branch that does not write it leaves it as it was)."""
    if edge.dst is node or edge.data.wcr is None:
        return target
    return f"cpufree::identity<{wcr_op(edge.data.wcr)}, {desc.dtype.ctype}>()"


def _window(outer: dt.Data, node: nodes.NestedSDFG, name: str, subset) -> subsets.Range:
    """The outer element that the inner container's first element is: the subset's first element when the inner
    container has the subset's shape, the array's first when it has the whole array's shape (DaCe narrows the
    outer memlet of a nested SDFG to what it accesses and keeps the inner array whole)."""
    inner = node.sdfg.arrays[name]
    mapping = {dace.symbolic.symbol(k): v for k, v in node.symbol_mapping.items()}
    shape = [dace.symbolic.pystr_to_symbolic(str(d)).subs(mapping) for d in inner.shape]
    if isinstance(inner, dt.Scalar) or _same(shape, [s for s in subset.size() if s != 1] or [1]):
        return subset
    if _same(shape, outer.shape):
        return subsets.Range([(0, 0, 1)] * len(outer.shape))
    raise NotPersistableError(
        f"a nested SDFG sees '{subset}' of an array of shape {tuple(outer.shape)} as shape {tuple(shape)}. "
        "Fix: pass whole arrays or plain slices to code that branches on values inside a parallel loop."
    )


def _same(a, b) -> bool:
    a, b = list(a), list(b)
    # by text: the inner and the outer symbol N may carry different assumptions, so N - N need not vanish
    return len(a) == len(b) and all(
        str(dace.symbolic.simplify(x)) == str(dace.symbolic.simplify(y)) for x, y in zip(a, b)
    )


class _Printer:
    def __init__(self, ctx: NestedContext, writer_class):
        self.ctx, self.writer_class = ctx, writer_class

    def _code(self, text: str) -> str:
        return interstate_code(text, self.ctx.sdfg, self.ctx.device | self.ctx.local)

    def region(self, region: ControlFlowRegion) -> list[str]:
        blocks = block_order(region)
        for e in region.edges():
            if not e.data.is_unconditional() or blocks.index(e.dst) != blocks.index(e.src) + 1:
                raise NotPersistableError(
                    f"the control flow of '{region.label}' inside a parallel loop is not a sequence of branches and "
                    "loops (a goto). Fix: write it with structured if/while/for."
                )
        lines = []
        for block in blocks:
            lines += self.block(block)
            for e in region.out_edges(block):
                lines += [f"{sym} = {self._code(value)};" for sym, value in e.data.assignments.items()]
        return lines

    def block(self, block) -> list[str]:
        if isinstance(block, SDFGState):
            return self.writer_class(self.ctx, block, []).scope(None)
        if isinstance(block, LoopRegion):
            return self.loop(block)
        if isinstance(block, ConditionalBlock):
            lines = []
            for k, (cond, body) in enumerate(block.branches):
                head = "else" if cond is None else f"{'if' if k == 0 else 'else if'} ({self._code(cond.as_string)})"
                lines += [f"{'} ' if k else ''}{head} {{"] + indent(self.region(body))
            return lines + ["}"] if lines else []
        if isinstance(block, BreakBlock):
            return ["break;"]
        if isinstance(block, ContinueBlock):
            return ["continue;"]
        if isinstance(block, ControlFlowRegion):
            return ["{"] + indent(self.region(block)) + ["}"]
        raise NotPersistableError(f"'{block.label}' ({type(block).__name__}) inside a parallel loop is not supported.")

    def loop(self, loop: LoopRegion) -> list[str]:
        var = loop.loop_variable
        if var and var not in self.ctx.sdfg.symbols:  # DaCe lists no symbol for a variable the body never reads
            return ["{", f"long long {var};"] + indent(self._loop(loop)) + ["}"]
        return self._loop(loop)

    def _loop(self, loop: LoopRegion) -> list[str]:
        init = self._code(loop.init_statement.as_string).rstrip(";") if loop.init_statement else ""
        update = self._code(loop.update_statement.as_string).rstrip(";") if loop.update_statement else ""
        cond = self._code(loop.loop_condition.as_string)
        body = indent(self.region(loop))
        if not loop.inverted:
            return [f"for ({init}; {cond}; {update}) {{"] + body + ["}"]
        if not loop.update_before_condition:
            raise NotPersistableError(f"loop '{loop.label}' inside a parallel loop checks before it updates.")
        # do-while: a `continue` reaches the update and the condition, as in the program
        return ([f"{init};"] if init else []) + ["do {"] + body + [f"}} while (({update or '0'}), ({cond}));"]
