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
    variable ``var``; ``extents`` are the C++ names of the parameters' extents. When every extent is a
    constant and their product fits in 31 bits, division and remainder are 32-bit (a 64-bit division is a
    long instruction sequence on GPUs); with symbolic extents they stay 64-bit (a run-time choice between
    the two raised register use, and with it the occupancy of register-heavy kernels such as gemm)."""
    count = _constant_product(ranges)
    narrow = count is not None and count < 2**31
    lines = [f"{INDEX_T} {var} = {source};"]
    for k in reversed(range(len(params))):
        b, _, s = ranges[k]
        if k == 0:
            digit = var
        elif narrow:
            digit = f"(long long)((unsigned){var} % (unsigned){extents[k]})"
        else:
            digit = f"({var} % {extents[k]})"
        lines.append(f"const {INDEX_T} {params[k]} = {cexpr(b)} + {digit} * ({cexpr(s)});")
        if k > 0:
            step = f"(long long)((unsigned){var} / (unsigned){extents[k]})" if narrow else f"{var} / {extents[k]}"
            lines.append(f"{var} = {step};")
    return lines


def _constant_product(ranges) -> int | None:
    total = 1
    for b, e, s in ranges:
        try:
            total *= max(0, (int(e) - int(b)) // int(s) + 1)
        except (TypeError, ValueError):
            return None
    return total
