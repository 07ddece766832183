"""Lowering of an SDFG's control flow (states, loops, conditionals, interstate edges) to the kernel IR.

Every thread of the grid runs the same control flow: loop counters and interstate symbols are
per-thread registers that all threads compute identically, and conditions that read device data
read it after the grid synchronisation that the sync analysis places before them.
"""

from __future__ import annotations

import ast

import dace
from dace.sdfg.state import (
    BreakBlock,
    ConditionalBlock,
    ContinueBlock,
    ControlFlowRegion,
    LoopRegion,
    ReturnBlock,
    SDFGState,
)
from dace.transformation.passes.analysis.loop_analysis import get_loop_stride

from dace_cpufree.cpp import cexpr
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.facts import BlockPart, state_part
from dace_cpufree.vocabulary import block_order, loop_range

from . import channel as chan
from . import ir
from .context import KernelContext
from .dataflow import state_items
from .expressions import interstate_code


def _data_names(ctx: KernelContext, code: str) -> frozenset[str]:
    names = {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)}
    return frozenset(names & ctx.device)


def control_item(ctx: KernelContext, label: str, code: str, statement: bool) -> ir.Item:
    """Interstate code executed redundantly by every thread (a condition or an assignment)."""
    text = interstate_code(code, ctx.sdfg, ctx.device)
    return ir.Item(
        label,
        [text + (";" if statement and not text.endswith(";") else "")],
        reads=_data_names(ctx, code),
        executor=ir.Executor.EVERY,
    )


def _assignments(ctx: KernelContext, edge) -> ir.Item | None:
    if not edge.data.assignments:
        return None
    lines, reads = [], set()
    for sym, value in edge.data.assignments.items():
        lines.append(f"{sym} = {interstate_code(value, ctx.sdfg, ctx.device)};")
        reads |= _data_names(ctx, value)
    return ir.Item(f"assign {edge.src.label}->{edge.dst.label}", lines, frozenset(reads), executor=ir.Executor.EVERY)


def _condition(ctx: KernelContext, edge) -> ir.Item | None:
    if edge.data.is_unconditional():
        return None
    return control_item(ctx, f"condition {edge.src.label}->{edge.dst.label}", edge.data.condition.as_string, False)


class Channel:
    """The channel's part in lowering (``None`` where the channel is off): a cancel point at the head of every
    loop and, with ``spec.progress_loops``, progress reported by the loops outside any other loop."""

    def __init__(self, spec: chan.ChannelSpec, facts: chan.ChannelFacts):
        self.spec, self.facts = spec, facts
        self.depth = 0  # loops around the block being lowered


def lower_block(ctx: KernelContext, block, channel: Channel | None = None):
    """``block`` as an IR node (``ir.Seq``, ``Loop``, ``Branch``, ``Graph`` or ``Jump``)."""
    if isinstance(block, SDFGState):
        return ir.Seq(_in_part(state_items(ctx, block), state_part(block)))
    if isinstance(block, LoopRegion):
        if channel is None:
            return _lower_loop(ctx, block)
        return _channel_loop(ctx, block, channel)
    if isinstance(block, ConditionalBlock):
        conds, bodies = [], []
        for cond, body in block.branches:
            conds.append(None if cond is None else control_item(ctx, f"if {block.label}", cond.as_string, False))
            bodies.append(lower_region(ctx, body, channel))
        return ir.Branch(conds, bodies)
    if isinstance(block, BreakBlock):
        return ir.Jump("break")
    if isinstance(block, ContinueBlock):
        return ir.Jump("continue")
    if isinstance(block, ReturnBlock):
        return ir.Jump("return")
    if isinstance(block, ControlFlowRegion):
        return lower_region(ctx, block, channel)
    raise NotPersistableError(f"control-flow block '{block.label}' ({type(block).__name__}) is not supported.")


def _in_part(items: list, part: BlockPart | None) -> list:
    """The items of a state of a block function run on that function's blocks (``part``)."""
    if part is None:
        return items
    for item in items:
        if item.collective:
            raise NotPersistableError(
                f"block function '{part.name.replace('__', '.', 1)}' contains {item.label}, a collective call of "
                "every thread of the grid (a matrix product), which cannot run on a part of the grid yet. Fix: "
                "call it before or after the grid function."
            )
        item.part = part
    return items


def _progress_range(loop: LoopRegion) -> tuple[str, str, str] | None:
    """C++ text of a loop's iteration count, first value and stride where DaCe's loop analysis finds its range and
    the loop has a variable, else ``None``."""
    found = loop_range(loop)
    if found is None or not loop.loop_variable:
        return None
    start, end, stride = found
    total = f"cpufree::channel::trip_count({cexpr(start)}, {cexpr(end)}, {cexpr(stride)})"
    return total, cexpr(start), cexpr(stride)


def _channel_loop(ctx: KernelContext, loop: LoopRegion, channel: Channel) -> ir.Seq | ir.Loop:
    """A loop with a cancel point at the head of its body; a top-level one reporting progress if asked."""
    progress = channel.spec.progress_loops and channel.depth == 0
    counted = _progress_range(loop) if progress else None
    channel.depth += 1
    try:
        lowered = _lower_loop(ctx, loop, channel)
    finally:
        channel.depth -= 1
    lowered.body.children.insert(0, chan.loop_head(channel.facts, loop.label, progress))
    lowered.progress = progress
    if not progress:
        return lowered
    lowered.progress_var = str(loop.loop_variable) if counted else None
    begin, end = chan.loop_bracket(loop.label, counted, lowered.progress_var)
    return ir.Seq([begin, lowered, end])


def _lower_loop(ctx: KernelContext, loop: LoopRegion, channel: Channel | None = None) -> ir.Loop:
    init = control_item(ctx, f"init {loop.label}", loop.init_statement.as_string, True) if loop.init_statement else None
    update = (
        control_item(ctx, f"update {loop.label}", loop.update_statement.as_string, True)
        if loop.update_statement
        else None
    )
    cond = control_item(ctx, f"condition {loop.label}", loop.loop_condition.as_string, False)
    return ir.Loop(
        loop.label,
        init,
        cond,
        update,
        lower_region(ctx, loop, channel),
        inverted=loop.inverted,
        update_before_condition=loop.update_before_condition,
        assigned=_assigned(loop),
        distinct=_distinct(loop),
        varying=_assigned(loop) | _variables(loop),
    )


def _variables(loop: LoopRegion) -> frozenset:
    """The variables of ``loop`` and of the loops inside it."""
    inner = loop.all_control_flow_regions()
    return frozenset(str(r.loop_variable) for r in [loop, *inner] if isinstance(r, LoopRegion) and r.loop_variable)


def _distinct(loop: LoopRegion) -> str | None:
    """The loop variable if no two iterations see the same value of it: a constant nonzero stride, and no
    assignment to it inside the loop."""
    var = str(loop.loop_variable) if loop.loop_variable else None
    if var is None or any(var in e.data.assignments for e in loop.all_interstate_edges()):
        return None
    try:
        stride = get_loop_stride(loop)
    except Exception:  # noqa: BLE001 - an update statement DaCe's analysis cannot parse
        return None
    return var if stride is not None and stride.is_number and stride != 0 else None


def _assigned(loop: LoopRegion) -> frozenset:
    """The symbols that interstate edges inside ``loop`` assign, except loop variables (a for loop's variable is
    not read after its loop: ``check_loop_variables`` refuses that)."""
    return frozenset(str(s) for e in loop.all_interstate_edges() for s in e.data.assignments) - _variables(loop)


def lower_region(ctx: KernelContext, region: ControlFlowRegion, channel: Channel | None = None) -> ir.Seq:
    """A region whose blocks form a chain becomes a sequence; anything else a goto graph."""
    blocks = block_order(region)
    chain = all(region.out_degree(b) <= 1 for b in blocks) and all(
        region.in_degree(b) <= (0 if i == 0 else 1) for i, b in enumerate(blocks)
    )
    chain = chain and all(
        e.data.is_unconditional() and blocks.index(e.dst) == blocks.index(e.src) + 1 for e in region.edges()
    )
    if chain:
        seq = ir.Seq()
        for block in blocks:
            seq.children.append(lower_block(ctx, block, channel))
            for edge in region.out_edges(block):
                assign = _assignments(ctx, edge)
                if assign is not None:
                    seq.children.append(assign)
        return seq
    index = {b: i for i, b in enumerate(blocks)}
    graph = ir.Graph(ctx.fresh("region"), [ir.Seq([lower_block(ctx, b, channel)]) for b in blocks], [])
    for edge in region.edges():
        graph.edges.append(ir.Edge(index[edge.src], index[edge.dst], _condition(ctx, edge), _assignments(ctx, edge)))
    return ir.Seq([graph])


def lower_sdfg(
    ctx: KernelContext, channel: chan.ChannelSpec | None = None, facts: chan.ChannelFacts | None = None
) -> ir.Seq:
    """The kernel IR of the SDFG; with ``channel``, cancel points at loop heads (registered in ``facts``) and
    progress reported by the top-level loops when the spec asks for it."""
    for node, state in ctx.sdfg.all_nodes_recursive():  # inside a map, one is a thread's code (nested.py)
        if isinstance(node, dace.nodes.NestedSDFG) and state.sdfg is ctx.sdfg and state.entry_node(node) is None:
            raise NotPersistableError(
                f"nested SDFG '{node.label}' could not be inlined; persistent kernels need a flat SDFG outside maps."
            )
    return lower_region(ctx, ctx.sdfg, Channel(channel, facts) if channel is not None else None)
