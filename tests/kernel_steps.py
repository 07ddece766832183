"""Reading generated kernels in tests: the top-level maps of an SDFG, the order of a kernel's steps, the kernel IR's
items (their forms and tiles) and the forms the SHMEM expansions chose for the puts."""

from dace.sdfg import nodes
from dace_cpufree.codegen import ir

import dace_cpufree
from dace_cpufree.vocabulary import PutForm


def items(source) -> list:
    """The work items of a ``KernelSource``'s kernel IR, in program order."""
    return list(ir.items(source.kernel_ir))


def forms(source) -> list:
    """The mapping to threads of every map step of a ``KernelSource`` (``ir.Form``), in program order."""
    return [i.form for i in items(source) if i.form is not None]


def tiles(source) -> set[int]:
    """The largest tiles of a ``KernelSource``'s tile steps."""
    return {i.tile for i in items(source) if i.tile}


def put_forms(program, **options) -> list[PutForm]:
    """How each put of ``program`` (built with the options of ``dace_cpufree.persistent_sdfg``) moves its data,
    as its expansion chose, in the order DaCe lists the tasklets."""
    sdfg = dace_cpufree.persistent_sdfg(program, **options)
    return [
        PutForm(n.location["cpufree_put"])
        for n, _ in sdfg.all_nodes_recursive()
        if isinstance(n, nodes.Tasklet) and "cpufree_put" in (n.location or {})
    ]


def top_maps(sdfg) -> list[str]:
    """The ranges of the SDFG's top-level maps, in the order DaCe lists them."""
    return [
        str(n.map.range)
        for n, st in sdfg.all_nodes_recursive()
        if isinstance(n, nodes.MapEntry) and st.entry_node(n) is None
    ]


def step_order(code: str, copies: str = "// copy __cpufree_halo", barriers: bool = False) -> list[str]:
    """The kernel's steps and grid syncs in order, one word each: GRID, map, put, wait, and ``unpack`` for a
    copy whose comment starts with ``copies``; with ``barriers``, BAR for a block barrier after a wait."""
    out = []
    for line in code[code.index("__global__") : code.index("// ---- host launcher")].split("\n"):
        s = line.strip()
        if s == "__grid.sync();":
            out.append("GRID")
        elif barriers and s == "__syncthreads();" and out and out[-1] == "wait":
            out.append("BAR")
        elif s.startswith("// map"):
            out.append("map")
        elif s.startswith("// tasklet putmem"):
            out.append("put")
        elif s.startswith("// tasklet signal_wait"):
            out.append("wait")
        elif s.startswith(copies):
            out.append("unpack")
    return out
