"""The printer of the kernel IR: each node as C++ lines of the kernel's body, with its grid syncs, block
barriers, step-timing marks and the channel's cancel points."""

from __future__ import annotations

import json

from . import channel as chan
from . import ir
from .captures import step_apart
from .context import KernelContext
from .parts import in_part


def _pad(lines: list[str], depth: int) -> list[str]:
    return ["    " * depth + line if line else line for line in lines]


class Printer:
    """Prints the kernel IR as C++.

    ``steps_apart``: grid steps inside loops go into functions of their own (``captures.step_apart``), which
    take the pointers of ``ctx`` (the ``KernelContext``) that the step's containers name. Used for
    kernels that communicate: there the SHMEM library's device code and the steps of the time loop shared
    one register allocation, and values hoisted out of the time loop stayed live across all steps
    (jacobi_3d's overlapped form: 207 registers per thread inlined, 48 apart, and 2.7x slower than the
    plain form on one H200; jacobi_2d at 4098^2: 340 -> 187 us per step). Without communication the calls
    cost more than they save (NPBench S on an H200, inlined vs apart: vadv 0.40 vs 0.66 ms, fdtd_2d 0.19 vs
    0.24, cg_residual 64 vs 77)."""

    def __init__(
        self,
        steps_apart: bool = False,
        timed: bool = False,
        race_check: bool = False,
        channel: chan.ChannelFacts | None = None,
        ctx: KernelContext | None = None,
    ):
        self.ctx = ctx
        self.labels = 0
        self.loops = 0  # loops around the node being printed
        self.steps_apart = steps_apart
        self.timed = timed
        self.race_check = race_check
        self.grid_syncs = 0  # grid syncs printed (KernelSource.grid_syncs)
        self.part_syncs = 0  # barriers of a block function's blocks printed
        self.channel = channel  # grid syncs become cancel points (cpufree/channel.cuh)
        #: with ``timed``, the name of each segment a mark closes (segment 0: the control flow between steps)
        self.segments = ["between steps"] if timed else []
        #: (first line, physical lines, label) of each printed step and loop: the first line is the very object of its
        #: ``// label`` comment in the printed lines, where :func:`step_lines` finds its place in the kernel's text
        self.spans = []

    def _span(self, lines: list[str], first: int, label: str) -> list[str]:
        """``lines``, whose entries from ``first`` on (a ``// label`` comment first) are one step or loop: recorded."""
        self.spans.append((lines[first], sum(line.count("\n") + 1 for line in lines[first:]), label))
        return lines

    def _mark(self, label: str) -> list[str]:
        """A mark closing a segment named ``label`` (``timed`` only)."""
        if not self.timed:
            return []
        self.segments.append(label)
        return [f"__cpufree_times.mark({len(self.segments) - 1});"]

    def _between(self) -> list[str]:
        return ["__cpufree_times.mark(0);"] if self.timed else []

    def _synced(self, grid: bool, label: str, item: ir.Item | None = None) -> list[str]:
        """A grid sync (``grid``) or block barrier before ``label`` (of ``item``), timed if asked."""
        self.grid_syncs += grid
        lines = chan.sync_lines(self.channel, label, grid, item)
        return self._between() + lines + self._mark(f"{'grid sync' if grid else 'block barrier'} before {label}")

    def node(self, node, depth: int) -> list[str]:
        if isinstance(node, ir.Item):
            return self.item(node, depth)
        if isinstance(node, ir.Seq):
            return [line for child in node.children for line in self.node(child, depth)]
        if isinstance(node, ir.Loop):
            return self.loop(node, depth)
        if isinstance(node, ir.Branch):
            return self.branch(node, depth)
        if isinstance(node, ir.Graph):
            return self.graph(node, depth)
        if isinstance(node, ir.Jump):
            return _pad([f"{node.kind};"], depth)
        raise TypeError(node)

    def item(self, item: ir.Item, depth: int) -> list[str]:
        if item.sync_before:
            lines = self._synced(True, item.label, item)
        elif item.bar_before:
            lines = self._synced(False, item.label)
        else:
            lines = self._between() if item.executor != ir.Executor.EVERY else []
        code = step_apart(item, self.ctx) if self.steps_apart and self.loops else item.code
        if self.race_check:  # the step that the race checker's report names
            where = f"{item.label} ({item.source})" if item.source else item.label
            code = [f"cpufree::race::at({json.dumps(where)});"] + code
        if item.part is not None:
            code, synced = in_part(item, code)
            self.part_syncs += synced
        if item.executor == ir.Executor.EVERY:
            return _pad(lines + code, depth)  # per-thread scalar code: timed with the control flow
        out = _pad(lines + [f"// {item.label}"] + code + self._mark(item.label), depth)
        return self._span(out, len(lines), item.label)

    @staticmethod
    def _expr(item: ir.Item | None) -> str:
        return "" if item is None else " ".join(item.code).rstrip(";")

    def _sync(self, item: ir.Item | None, depth: int) -> list[str]:
        return _pad(self._synced(True, item.label, item), depth) if item and item.sync_before else []

    def loop(self, loop: ir.Loop, depth: int) -> list[str]:
        label = f"loop {loop.label}"
        self.loops += 1
        body = self.node(loop.body, depth + 1)
        self.loops -= 1
        cond = self._expr(loop.cond)
        if not loop.inverted and not loop.cond.sync_before and not (loop.update and loop.update.sync_before):
            head = f"for ({self._expr(loop.init)}; {cond}; {self._expr(loop.update)}) {{"
            return self._span(_pad([f"// {label}", head], depth) + body + _pad(["}"], depth), 0, label)
        init = self._sync(loop.init, depth) + (_pad([self._expr(loop.init) + ";"], depth) if loop.init else [])
        check = self._sync(loop.cond, depth + 1) + _pad([f"if (!({cond})) break;"], depth + 1)
        if not loop.inverted and not (loop.update and loop.update.sync_before):
            # the condition needs a sync first: test it inside; `continue` still runs the update
            head = f"for (; ; {self._expr(loop.update)}) {{"
            out = init + _pad([f"// {label}", head], depth) + check + body + _pad(["}"], depth)
            return self._span(out, len(init), label)
        update = self._sync(loop.update, depth + 1) + (
            _pad([self._expr(loop.update) + ";"], depth + 1) if loop.update else []
        )
        if not loop.inverted:
            inner = check + body + update
        elif loop.update_before_condition:
            inner = body + update + check
        else:
            inner = body + check + update
        out = init + _pad([f"// {label}", "while (true) {"], depth) + inner + _pad(["}"], depth)
        return self._span(out, len(init), label)

    @staticmethod
    def _branch_label(branch: ir.Branch) -> str:
        return next((f"branch {c.label}" for c in branch.conds if c is not None), "a branch")

    def branch(self, branch: ir.Branch, depth: int) -> list[str]:
        out = []
        if synced := [c for c in branch.conds if c is not None and c.sync_before]:
            out += _pad(self._synced(True, self._branch_label(branch), synced[0]), depth)  # alike (loop_points)
        elif any(c is not None and c.bar_before for c in branch.conds):
            out += _pad(self._synced(False, self._branch_label(branch)), depth)
        for k, (cond, body) in enumerate(zip(branch.conds, branch.bodies)):
            if cond is None:
                head = "} else {" if k else "{"
            else:
                head = ("} else if (" if k else "if (") + self._expr(cond) + ") {"
            out += _pad([head], depth) + self.node(body, depth + 1)
        return out + _pad(["}"], depth)

    def graph(self, graph: ir.Graph, depth: int) -> list[str]:
        self.loops += 1  # unstructured control flow may jump back
        try:
            return self._graph(graph, depth)
        finally:
            self.loops -= 1

    def _graph(self, graph: ir.Graph, depth: int) -> list[str]:
        out, end = [], f"{graph.label}_end"
        for i, block in enumerate(graph.blocks):
            out += _pad([f"{graph.label}_b{i}:;"], depth) + self.node(block, depth)
            for edge in (e for e in graph.edges if e.src == i):
                if edge.cond is None:
                    assign = self.node(edge.assign, depth) if edge.assign else []
                    out += assign + _pad([f"goto {graph.label}_b{edge.dst};"], depth)
                    continue
                assign = self.node(edge.assign, depth + 1) if edge.assign else []
                out += self._sync(edge.cond, depth)
                out += _pad([f"if ({self._expr(edge.cond)}) {{"], depth) + assign
                out += _pad([f"goto {graph.label}_b{edge.dst};", "}"], depth + 1)[:1] + _pad(["}"], depth)
            out += _pad([f"goto {end};"], depth)
        return out + _pad([f"{end}:;"], depth)
