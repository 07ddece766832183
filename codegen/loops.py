"""C++ loop text shared by the plain grid-stride lowering (``dataflow.py``) and the tile-mapped one
(``tiles.py``): indentation, nested sequential loops, and decoding a flat index into map parameters."""

from __future__ import annotations

from .expressions import INDEX_T, cexpr


def indent(lines: list[str], n: int = 1) -> list[str]:
    return ["    " * n + line for line in lines]


def nested_loops(params: list[str], ranges: list, body: list[str]) -> list[str]:
    """Sequential ``for`` loops over ``ranges`` (inclusive ends, DaCe's convention) around ``body``."""
    lines = []
    for depth, (p, (b, e, s)) in enumerate(zip(params, ranges)):
        lines.append("    " * depth + f"for ({INDEX_T} {p} = {cexpr(b)}; {p} <= {cexpr(e)}; {p} += {cexpr(s)}) {{")
    depth = len(params)
    return lines + indent(body, depth) + ["    " * d + "}" for d in reversed(range(depth))]


def decode_flat(source: str, var: str, params: list[str], ranges: list, extents: list[str]) -> list[str]:
    """Map parameters from the flat index ``source`` (last parameter fastest), through the running
    variable ``var``; ``extents`` are the C++ names of the parameters' extents. Division and remainder
    go through ``cpufree::div_``/``mod_``, 32-bit whenever the operands fit."""
    lines = [f"{INDEX_T} {var} = {source};"]
    for k in reversed(range(len(params))):
        b, _, s = ranges[k]
        digit = var if k == 0 else f"cpufree::mod_({var}, {extents[k]})"
        lines.append(f"const {INDEX_T} {params[k]} = {cexpr(b)} + {digit} * ({cexpr(s)});")
        if k > 0:
            lines.append(f"{var} = cpufree::div_({var}, {extents[k]});")
    return lines
