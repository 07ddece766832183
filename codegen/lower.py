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

from dace_cpufree.errors import NotPersistableError

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


def lower_block(ctx: KernelContext, block) -> ir.Seq | ir.Loop | ir.Branch | ir.Graph | ir.Jump:
    if isinstance(block, SDFGState):
        return ir.Seq(state_items(ctx, block))
    if isinstance(block, LoopRegion):
        return _lower_loop(ctx, block)
    if isinstance(block, ConditionalBlock):
        conds, bodies = [], []
        for cond, body in block.branches:
            conds.append(None if cond is None else control_item(ctx, f"if {block.label}", cond.as_string, False))
            bodies.append(lower_region(ctx, body))
        return ir.Branch(conds, bodies)
    if isinstance(block, BreakBlock):
        return ir.Jump("break")
    if isinstance(block, ContinueBlock):
        return ir.Jump("continue")
    if isinstance(block, ReturnBlock):
        return ir.Jump("return")
    if isinstance(block, ControlFlowRegion):
        return lower_region(ctx, block)
    raise NotPersistableError(f"control-flow block '{block.label}' ({type(block).__name__}) is not supported.")


def _lower_loop(ctx: KernelContext, loop: LoopRegion) -> ir.Loop:
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
        lower_region(ctx, loop),
        inverted=loop.inverted,
        update_before_condition=loop.update_before_condition,
    )


def lower_region(ctx: KernelContext, region: ControlFlowRegion) -> ir.Seq:
    """A region whose blocks form a chain becomes a sequence; anything else a goto graph."""
    blocks = _order(region)
    chain = all(region.out_degree(b) <= 1 for b in blocks) and all(
        region.in_degree(b) <= (0 if i == 0 else 1) for i, b in enumerate(blocks)
    )
    chain = chain and all(
        e.data.is_unconditional() and blocks.index(e.dst) == blocks.index(e.src) + 1 for e in region.edges()
    )
    if chain:
        seq = ir.Seq()
        for block in blocks:
            seq.children.append(lower_block(ctx, block))
            for edge in region.out_edges(block):
                assign = _assignments(ctx, edge)
                if assign is not None:
                    seq.children.append(assign)
        return seq
    index = {b: i for i, b in enumerate(blocks)}
    graph = ir.Graph(ctx.fresh("region"), [ir.Seq([lower_block(ctx, b)]) for b in blocks], [])
    for edge in region.edges():
        graph.edges.append(ir.Edge(index[edge.src], index[edge.dst], _condition(ctx, edge), _assignments(ctx, edge)))
    return ir.Seq([graph])


def _order(region: ControlFlowRegion) -> list:
    """Blocks in reverse post-order from the start block (unreachable blocks are dropped)."""
    if region.number_of_nodes() == 0:
        return []
    start = region.start_block
    seen, post = set(), []

    def visit(b):
        seen.add(b)
        for s in region.successors(b):
            if s not in seen:
                visit(s)
        post.append(b)

    visit(start)
    return list(reversed(post))


def lower_sdfg(ctx: KernelContext) -> ir.Seq:
    if any(isinstance(n, dace.nodes.NestedSDFG) for n, _ in ctx.sdfg.all_nodes_recursive()):
        nested = next(n for n, _ in ctx.sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.NestedSDFG))
        raise NotPersistableError(
            f"nested SDFG '{nested.label}' could not be inlined; persistent kernels need a flat SDFG."
        )
    return lower_region(ctx, ctx.sdfg)
