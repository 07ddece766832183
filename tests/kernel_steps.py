"""Reading generated kernels in tests: the top-level maps of an SDFG, the kernel IR's items (their forms and tiles)
and steps in printed order, and the forms the SHMEM expansions chose for the puts."""

from dace.sdfg import nodes
from dace_cpufree.codegen import ir

import dace_cpufree
from dace_cpufree.facts import CpufreeTasklet
from dace_cpufree.vocabulary import PutForm


def items(source) -> list:
    """The work items of a ``KernelSource``'s kernel IR, in program order."""
    return list(ir.items(source.kernel_ir))


def loops(source) -> list:
    """The loops of a ``KernelSource``'s kernel IR (``ir.Loop``), outer ones before the loops inside them."""
    return [c for seq in ir.seqs(source.kernel_ir) for c in seq.children if isinstance(c, ir.Loop)]


def forms(source) -> list:
    """The mapping to threads of every map step of a ``KernelSource`` (``ir.Form``), in program order."""
    return [i.form for i in items(source) if i.form is not None]


def tiles(source) -> set[int]:
    """The largest tiles of a ``KernelSource``'s tile steps."""
    return {i.tile for i in items(source) if i.tile}


def puts(sdfg) -> list[CpufreeTasklet]:
    """The tasklets the SHMEM expansions made of the puts of a prepared SDFG, in the order DaCe lists them; each
    one's ``put`` is the expansion's choice (a ``PutForm``) and ``put_hidden`` whether other work comes before the
    next wait."""
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, CpufreeTasklet) and n.put is not None]


def hidden(put: CpufreeTasklet) -> bool:
    """Whether other work comes before the wait after a put (its expansion's ``put_hidden``)."""
    return put.put_hidden


def put_forms(program, **options) -> list[PutForm]:
    """How each put of ``program`` (built with the options of ``dace_cpufree.persistent_sdfg``) moves its data,
    as its expansion chose, in the order DaCe lists the tasklets."""
    return [n.put for n in puts(dace_cpufree.persistent_sdfg(program, **options))]


def top_maps(sdfg) -> list[str]:
    """The ranges of the SDFG's top-level maps, in the order DaCe lists them."""
    return [
        str(n.map.range)
        for n, st in sdfg.all_nodes_recursive()
        if isinstance(n, nodes.MapEntry) and st.entry_node(n) is None
    ]


def steps(node, copies: str = "copy __cpufree_halo", barriers: bool = False) -> list[str]:
    """The steps and grid syncs under a kernel IR node (a ``KernelSource``: its whole IR) in the order they are
    printed, one word each: GRID, map, put, wait, and ``unpack`` for a copy whose label starts with ``copies``;
    with ``barriers``, BAR for a block barrier after a wait."""
    out = []

    def synced(grid: bool, bar: bool):
        if grid:
            out.append("GRID")
        elif bar and barriers and out and out[-1] == "wait":
            out.append("BAR")

    def walk(n):
        if n is None:
            return
        if isinstance(n, ir.Item):
            synced(n.sync_before, n.bar_before)
            for prefix, word in (("map", "map"), ("tasklet putmem", "put"), ("tasklet signal_wait", "wait")):
                if n.executor != ir.Executor.EVERY and n.label.startswith(prefix):
                    out.append(word)
            if n.executor != ir.Executor.EVERY and n.label.startswith(copies):
                out.append("unpack")
        elif isinstance(n, ir.Seq):
            for c in n.children:
                walk(c)
        elif isinstance(n, ir.Loop):
            if not n.inverted:
                order = [n.init, n.cond, n.body, n.update]
            elif n.update_before_condition:
                order = [n.init, n.body, n.update, n.cond]
            else:
                order = [n.init, n.body, n.cond, n.update]
            for part in order:
                walk(part)
        elif isinstance(n, ir.Branch):
            conds = [c for c in n.conds if c is not None]
            synced(any(c.sync_before for c in conds), any(c.bar_before for c in conds))
            for body in n.bodies:
                walk(body)
        elif isinstance(n, ir.Graph):
            for k, block in enumerate(n.blocks):
                walk(block)
                for e in (e for e in n.edges if e.src == k):
                    walk(e.cond)
                    walk(e.assign)

    walk(getattr(node, "kernel_ir", node))
    return out
