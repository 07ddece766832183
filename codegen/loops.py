"""C++ loop text shared by the plain grid-stride lowering (``maps.py``, ``reductions.py``) and the tile-mapped one
(``tiles.py``): nested sequential loops, grid-stride loops, and decoding a flat index into map parameters."""

from __future__ import annotations

from dataclasses import dataclass, field

from dace import subsets

from dace_cpufree.cpp import INDEX_T, cexpr, indent

from .expressions import range_extents


@dataclass
class Dividers:
    """Divisors of the kernel's flat-index decodes that are prepared once, in the kernel's prologue, as
    ``cpufree::Divider`` objects (a multiply-high and a shift per division instead of a 64-bit division, whose
    dependent chain nvcc hoists out of a time loop only while that loop holds no control flow that changes per
    step). Prepared: the extents that are a divisor (every extent of a decode but its first) in a step inside a
    loop (``KernelContext.loop_dividers``) and are made of ``invariant`` symbols alone, kernel arguments that the
    kernel never assigns; one divider per expression."""

    invariant: frozenset = frozenset()
    #: the prepared divisors: C++ expression -> (name of its divider, the extent as the SDFG states it)
    prepared: dict = field(default_factory=dict)

    def of(self, ranges) -> list[str | None]:
        """Per dimension of ``ranges``, the divider of its extent (``None``: not prepared, or not a divisor)."""
        names: list[str | None] = [None]
        for size in subsets.Range(list(ranges)).size()[1:]:
            free = {str(s) for s in getattr(size, "free_symbols", ())}
            if not free or not free <= self.invariant:
                names.append(None)
                continue
            text = f"cpufree::max_<{INDEX_T}>(0, {cexpr(size)})"
            if text not in self.prepared:
                self.prepared[text] = (f"__dv{len(self.prepared)}", str(size))
            names.append(self.prepared[text][0])
        return names[: len(ranges)]

    def declarations(self) -> list[str]:
        """The prologue's lines that build the dividers (indented as the kernel's body)."""
        return [f"    const cpufree::Divider {name}({text});" for text, (name, _) in self.prepared.items()]

    @property
    def extents(self) -> tuple[str, ...]:
        """The prepared extents, as the SDFG states them, in the order of their dividers."""
        return tuple(extent for _, extent in self.prepared.values())


def nested_loops(params: list[str], ranges: list, body: list[str]) -> list[str]:
    """Sequential ``for`` loops over ``ranges`` (inclusive ends, DaCe's convention) around ``body``."""
    lines = []
    for depth, (p, (b, e, s)) in enumerate(zip(params, ranges)):
        lines.append("    " * depth + f"for ({INDEX_T} {p} = {cexpr(b)}; {p} <= {cexpr(e)}; {p} += {cexpr(s)}) {{")
    depth = len(params)
    return lines + indent(body, depth) + ["    " * d + "}" for d in reversed(range(depth))]


def decode_flat(
    source: str, var: str, params: list[str], ranges: list, extents: list[str], dividers: Dividers | None = None
) -> list[str]:
    """Map parameters from the flat index ``source`` (last parameter fastest), through the running
    variable ``var``; ``extents`` are the C++ names of the parameters' extents. When every extent is a
    constant and their product fits in 31 bits, division and remainder are 32-bit (a 64-bit division is a
    long instruction sequence on GPUs). Symbolic extents that ``dividers`` prepares divide through their
    ``cpufree::Divider``; others stay 64-bit (a run-time choice between the two widths at each decode raised
    register use, and with it the occupancy of register-heavy kernels such as gemm)."""
    count = _constant_product(ranges)
    narrow = count is not None and count < 2**31
    prepared = dividers.of(ranges) if dividers is not None and not narrow else [None] * len(params)
    lines = [f"{INDEX_T} {var} = {source};"]
    for k in reversed(range(len(params))):
        b, _, s = ranges[k]
        if k > 0 and prepared[k] is not None:
            lines.append(f"const cpufree::DivMod {var}_dm{k} = {prepared[k]}.divmod({var}, {extents[k]});")
            lines.append(f"const {INDEX_T} {params[k]} = {cexpr(b)} + {var}_dm{k}.rem * ({cexpr(s)});")
            lines.append(f"{var} = {var}_dm{k}.quot;")
            continue
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


def decode_params(
    index: str, params: list[str], ranges: list, tag: str = "", dividers: Dividers | None = None
) -> list[str]:
    """Turn one flat index into map parameters, last parameter fastest (contiguous).

    Extents are the variables ``__e{tag}{k}`` declared by :func:`extent_lines`; ``dividers``: see :func:`decode_flat`.
    """
    extents = [f"__e{tag}{k}" for k in range(len(params))]
    return decode_flat(index, f"__r{tag}", params, ranges, extents, dividers)


def extent_lines(ranges, tag: str = "") -> list[str]:
    extents = range_extents(subsets.Range(ranges))
    lines = [f"const {INDEX_T} __e{tag}{k} = {e};" for k, e in enumerate(extents)]
    lines.append(f"const {INDEX_T} __n{tag} = " + " * ".join(f"__e{tag}{k}" for k in range(len(ranges))) + ";")
    return lines


def grid_stride(
    params,
    ranges,
    body: list[str],
    prologue=(),
    epilogue=(),
    per_warp: bool = False,
    spread: bool = False,
    dividers: Dividers | None = None,
) -> list[str]:
    """``for`` over the product of ``ranges``, distributed over every thread (or warp) of the grid.

    ``spread``: the warps of the grid are numbered block-fastest (warp ``w`` of block ``b`` is warp
    ``w * gridDim.x + b``), so that fewer iterations than threads still land on every block, hence every
    SM, and not on the first blocks alone (mvt's column sums: 16000 long loops on 32 of 396 blocks when
    numbered thread-fastest). Lanes stay consecutive: accesses along the iteration stay coalesced.
    ``dividers``: the kernel's prepared divisors (:class:`Dividers`), for the decode of the flat index."""
    if not params:
        return ["if (__tid == 0) {"] + indent(list(prologue) + body + list(epilogue)) + ["}"]
    lines = extent_lines(ranges) + list(prologue)
    if per_warp:
        lines.append(f"for ({INDEX_T} __f = __tid / warpSize; __f < __n; __f += __nthreads / warpSize) {{")
    elif spread:
        lines.append(  # a permutation of the threads when blocks are whole warps; else thread-fastest
            f"const {INDEX_T} __spread = blockDim.x % warpSize ? __tid : "
            "((long long)(threadIdx.x / warpSize) * __blocks + __block) * warpSize + threadIdx.x % warpSize;"
        )
        lines.append(f"for ({INDEX_T} __f = __spread; __f < __n; __f += __nthreads) {{")
    else:
        lines.append(f"for ({INDEX_T} __f = __tid; __f < __n; __f += __nthreads) {{")
    lines += indent(decode_params("__f", params, ranges, dividers=dividers) + body)
    lines.append("}")
    lines += list(epilogue)
    return lines
