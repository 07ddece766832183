"""Reading generated kernels in tests: the top-level maps of an SDFG, the order of a kernel's steps."""

from dace.sdfg import nodes


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
