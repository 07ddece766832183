"""Tile-mapped loops: how a scheduled step runs on the fixed cooperative grid.

The kernel's blocks are split into tiles of ``T`` threads (``cooperative_groups::tiled_partition<T>``
up to a warp, ``cpufree::BlockTile<T>`` beyond). The pass :class:`~dace_cpufree.transformations.ScheduleThreads`
bounds ``T`` by the power of two covering the contiguous extent (at compile time when the extent is
known, else 1024); ``cpufree::with_tile`` instantiates the powers of two up to that bound and picks one
at run time (``tile_for_map``: chunks covering the extent with few idle lanes; ``tile_for_reduction``:
about eight elements per lane). The
lanes of a tile cover the contiguous dimension; the tiles stride over one loop that fuses up to three
outer dimensions (and, for element-wise steps, the tile-sized chunks of the contiguous one), whose
indices are decoded once per iteration; outer dimensions beyond three run as sequential loops.
"""

from __future__ import annotations

from dace import subsets

from dace_cpufree.cpp import INDEX_T, cexpr, indent

from .captures import Pointers, step
from .expressions import range_extents
from .loops import decode_flat, nested_loops

MAX_FUSED = 3
# The slices' loop of a column reduction, unrolled twice: nvcc's default (4) took mvt to 93 registers per
# thread and halved the blocks; at paper size on an H200, unroll 1 / 2 / 4: atax 2.86 / 2.06 / 4.19 ms,
# bicg 3.18 / 2.22 / 4.91, mvt 1.37 / 1.31 / 1.29.
COLUMN_UNROLL = "#pragma unroll 4"


def extent_decls(params, ranges, tag: str) -> list[str]:
    extents = range_extents(subsets.Range(list(ranges)))
    return [f"const {INDEX_T} __x{tag}_{p} = {e};" for p, e in zip(params, extents)]


def split_outer(outer: list[str]) -> tuple[list[str], list[str]]:
    """``(sequential, fused)``: the (up to three) innermost outer dimensions are fused into the
    tile-stride loop, any before them run as sequential loops around it."""
    return (outer[:-MAX_FUSED] if len(outer) > MAX_FUSED else []), outer[-MAX_FUSED:]


def layout(outer: list[str]) -> str:
    """How :func:`tile_stride` loops over ``outer``, for ``dace-cpufree inspect``."""
    seq, fused = split_outer(outer)
    text = f"tile-stride loop over fused ({', '.join(fused)})" if fused else "one tile"
    return text + (f", sequential ({', '.join(seq)})" if seq else "")


def tile_stride(
    outer, outer_ranges, tag: str, inner: list[str], chunks: str | None = None, dividers=None, start: str | None = None
) -> list[str]:
    """Sequential loops over the outer dimensions beyond three, around the tile-stride loop that
    fuses the (up to three) innermost outer dimensions and, with ``chunks``, the tile-sized chunks of
    the contiguous dimension (``__k{tag}``), so that few rows still spread over the whole grid. ``dividers``: the
    kernel's prepared divisors (``loops.Dividers``) for the decode of the fused dimensions. ``start``: the tile that
    takes the first row is this count's (modulo the tiles), not the first tile (``overlap.py``)."""
    seq, fused = split_outer(outer)
    seq_ranges = outer_ranges[: len(seq)]
    fused_ranges = outer_ranges[len(seq) :]
    count = " * ".join([f"__x{tag}_{p}" for p in fused] + ([f"({chunks})"] if chunks else [])) or "1"
    first = "(long long)__block * __tile.meta_group_size() + __tile.meta_group_rank()"
    if start:
        first = f"({first} + __tiles{tag} - {start} % __tiles{tag}) % __tiles{tag}"
    loop = [
        f"const {INDEX_T} __tiles{tag} = (long long)__blocks * __tile.meta_group_size();",
        f"for ({INDEX_T} __o{tag} = {first}; __o{tag} < {count}; __o{tag} += __tiles{tag}) {{",
    ]
    decode, extents = [], [f"__x{tag}_{p}" for p in fused]
    if chunks:
        decode.append(f"const {INDEX_T} __k{tag} = __o{tag} % ({chunks});")
        if fused:
            decode.append(f"const {INDEX_T} __p{tag} = __o{tag} / ({chunks});")
            decode += decode_flat(f"__p{tag}", f"__q{tag}", fused, fused_ranges, extents, dividers)
    elif fused:
        decode = decode_flat(f"__o{tag}", f"__q{tag}", fused, fused_ranges, extents, dividers)
    loop += indent(decode + inner) + ["}"]
    return nested_loops(seq, seq_ranges, loop)


def with_tile(tile: int, want: str, body: list[str], passed: Pointers) -> list[str]:
    """``body`` run by every thread with ``__tile`` bound to its tile, in a step function that takes the
    ``passed`` pointers (:mod:`.captures`).

    ``tile`` is the largest tile (static when the extent is known at compile time, else 1024); the
    kernel takes the largest power of two up to it that ``want`` asks for and the block holds. The step
    captures by value: each tile size's instantiation is its own function (``cpufree::run_step``), and a
    by-reference capture made it reload every kernel argument through a pointer after each global store
    (the compiler cannot rule out aliasing; gesummv's warp step: 71 local-memory loads in PTX). On an H200
    this made softmax, mlp, atax, bicg and syr2k faster, and mvt's fused rows slower (cause not found).
    """
    return step(body, passed, f"cpufree::with_tile<{tile or 1024}>({want}, __step")


def tiled_map(
    params, ranges, contiguous: str, tile: int, body: list[str], passed: Pointers, tag: str = "", dividers=None
) -> tuple[list[str], str]:
    """A map (or the parallel part of one) whose lanes cover ``contiguous`` in tile-sized chunks, its step
    taking the ``passed`` pointers; returns the code and the tile request."""
    k = params.index(contiguous)
    outer = [p for p in params if p != contiguous]
    outer_ranges = [r for p, r in zip(params, ranges) if p != contiguous]
    b, _, s = ranges[k]
    ext = f"__x{tag}_{contiguous}"
    lanes = [
        f"const {INDEX_T} __l{tag} = __k{tag} * __tile.num_threads() + __tile.thread_rank();",
        f"if (__l{tag} < {ext}) {{",
        f"    const {INDEX_T} {contiguous} = {cexpr(b)} + __l{tag} * ({cexpr(s)});",
    ]
    lanes += indent(body) + ["}"]
    want = f"cpufree::tile_for_map({ext})"
    chunks = f"({ext} + __tile.num_threads() - 1) / __tile.num_threads()"
    code = extent_decls(params, ranges, tag)
    code += with_tile(tile, want, tile_stride(outer, outer_ranges, tag, lanes, chunks, dividers), passed)
    return code, want


def tiled_reduction(
    par,
    par_ranges,
    red,
    red_ranges,
    contiguous: str,
    tile: int,
    prologue,
    body,
    epilogue,
    passed: Pointers,
    tag="",
    dividers=None,
) -> tuple[list[str], str]:
    """A tile per output (``par``); its lanes stride over the reduced space (``red``, flattened, the
    last parameter fastest) and combine with a tile reduction. ``prologue``/``epilogue`` run per
    output, around the lane loop; the step takes the ``passed`` pointers."""
    inner = reduction_lanes(red, red_ranges, prologue, body, epilogue, tag, dividers)
    rows = " * ".join(f"__x{tag}_{p}" for p in par) or "1"
    want = f"cpufree::tile_for_reduction(__x{tag}_{contiguous}, {rows})"
    code = extent_decls(list(par) + list(red), list(par_ranges) + list(red_ranges), tag)
    code += with_tile(tile, want, tile_stride(list(par), list(par_ranges), tag, inner, None, dividers), passed)
    return code, want


def tiled_columns(
    par, par_ranges, red, red_ranges, prologue, body, epilogue, passed: Pointers, tag: str = "", dividers=None
) -> tuple[list[str], str]:
    """A reduction whose outputs (``par``) run along the contiguous dimension, a column each (``A.T @ y``).

    A tile's lanes take consecutive outputs, a lane each (``tile_for_columns``: up to 1 KiB of doubles of each row
    in one piece), and the reduced space (``red``, flattened) is split into ``__chunks`` ranges of rows
    (``column_chunks``: up to four units of work per tile of the grid); a unit is a group of outputs and a range. Each
    lane sums its range in a register, and ``epilogue`` adds it to the output (atomically where there are several
    ranges). Units go to the blocks' first tiles first, then to their second ones, so that few units still spread
    over every block."""
    cols = " * ".join(f"__x{tag}_{p}" for p in par) or "1"
    flat = " * ".join(f"__x{tag}_{p}" for p in red)
    decode_par = decode_flat(f"__c{tag}", f"__q{tag}", par, par_ranges, [f"__x{tag}_{p}" for p in par], dividers)
    decode_red = decode_flat(f"__l{tag}", f"__m{tag}", red, red_ranges, [f"__x{tag}_{p}" for p in red], dividers)
    step = [
        f"const {INDEX_T} __cols = {cols}, __rows = {flat};",
        f"const {INDEX_T} __lanes = __tile.num_threads(), __groups = (__cols + __lanes - 1) / __lanes;",
        f"const {INDEX_T} __tiles{tag} = (long long)__blocks * __tile.meta_group_size();",
        f"const {INDEX_T} __chunks = cpufree::column_chunks(__groups, __rows, __tiles{tag});",
        f"const {INDEX_T} __per = (__rows + __chunks - 1) / __chunks;",
        f"for ({INDEX_T} __o{tag} = (long long)__tile.meta_group_rank() * __blocks + __block; "
        f"__o{tag} < __groups * __chunks; __o{tag} += __tiles{tag}) {{",
    ]
    inner = [
        f"const {INDEX_T} __c{tag} = (__o{tag} / __chunks) * __lanes + __tile.thread_rank();",
        f"const {INDEX_T} __begin{tag} = (__o{tag} % __chunks) * __per;",
        f"const {INDEX_T} __end{tag} = cpufree::min_<{INDEX_T}>(__rows, __begin{tag} + __per);",
    ]
    inner += decode_par + list(prologue) + [f"if (__c{tag} < __cols) {{"]
    inner += indent(
        [
            COLUMN_UNROLL,
            f"for ({INDEX_T} __l{tag} = __begin{tag}; __l{tag} < __end{tag}; ++__l{tag}) {{",
        ]
        + indent(decode_red + body)
        + ["}"]
    )
    inner += ["}"] + list(epilogue)
    step += indent(inner) + ["}"]
    want = f"cpufree::tile_for_columns({cols}, {flat})"
    code = extent_decls(list(par) + list(red), list(par_ranges) + list(red_ranges), tag)
    return code + with_tile(1024, want, step, passed), want


def reduction_lanes(red, red_ranges, prologue, body, epilogue, tag: str = "", dividers=None) -> list[str]:
    """What one tile runs for one output: ``prologue``, its lanes over the reduced space, ``epilogue``."""
    return list(prologue) + lane_loop(red, red_ranges, body, tag, dividers) + list(epilogue)


def lane_loop(params, ranges, body, tag: str = "", dividers=None) -> list[str]:
    """The lanes of a tile striding over ``params`` (flattened, the last parameter fastest; extents
    ``__x{tag}_{p}``, see :func:`extent_decls`), each running ``body``; ``dividers``: the kernel's prepared
    divisors (``loops.Dividers``)."""
    flat = " * ".join(f"__x{tag}_{p}" for p in params)
    lines = [f"for ({INDEX_T} __l{tag} = __tile.thread_rank(); __l{tag} < {flat}; __l{tag} += __tile.num_threads()) {{"]
    decode = decode_flat(f"__l{tag}", f"__m{tag}", params, ranges, [f"__x{tag}_{p}" for p in params], dividers)
    return lines + indent(decode + body) + ["}"]
