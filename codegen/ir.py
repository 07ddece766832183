"""A small structured IR of one persistent kernel: the SDFG's control flow with its work items.

The SDFG is lowered to this tree once (``lower.py``), grid synchronisations are placed on it
(``syncs.py``) and it is printed as C++ (``kernel.py``). Work items carry the data containers in
device memory that they read and write, and who executes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Executor(Enum):
    """Which threads of the grid run an item."""

    GRID = "grid"  # work distributed over all threads (a map, a copy)
    LEADER = "leader"  # thread 0 of block 0 alone (a scalar tasklet)
    EVERY = "every"  # every thread redundantly (control flow reading device data)
    BLOCK = "block"  # every thread of one block (``Item.block``): block-cooperative library calls
    THREAD = "thread"  # thread 0 of one block (``Item.block``)
    BLOCKS = "blocks"  # every thread of the blocks b with b % lanes == block % lanes (``Item.block`` is the lane)
    # one thread of every block, each for its own block (``Item.block``: the warp, thread block * warpSize).
    # For waits: what the item stands for (a flag seen, the halo it guards complete) holds in every block once
    # that block's threads meet at a barrier, so its consumers need a block barrier, not a grid sync.
    EACH = "each"


class Form(Enum):
    """How a map step's work is mapped to threads, decided where the step is lowered (``maps.py``, ``rows.py``)."""

    ELEMENTS = "elements"  # a grid-stride loop, a thread per element
    GRID_SUMS = "grid sums"  # a thread per element, sums over the map in registers, one atomic per warp
    THREAD_PER_OUTPUT = "thread per output"  # a register reduction per output
    WARP_PER_OUTPUT = "warp per output"  # lanes over the reduced space, a shuffle reduction
    GRID_REDUCTION = "grid reduction"  # one output: warp shuffles, one atomic per warp
    TILED_MAP = "tiled map"  # tiles' lanes over the contiguous dimension in tile-sized chunks
    TILE_REDUCTION = "tile reduction"  # a tile per output, lanes over the reduced space, a tile reduction
    TILE_COLUMNS = "tile columns"  # a warp's width of outputs per tile, its warps split the reduced space
    ROWS = "rows"  # steps fused row by row, a tile per row, tile barriers between them


@dataclass(eq=False)
class Item:
    """A unit of work. ``code`` is C++ text; ``work`` the iteration count that sizes the grid."""

    label: str
    code: list[str]
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()
    executor: Executor = Executor.GRID
    work: str | None = None
    sync_before: bool = False
    bar_before: bool = False  # a block barrier before it (an EACH item's effect is needed; no grid sync is)
    plain_sync: bool = False  # with the channel: its grid sync is not a cancel point (``loop_points``)
    progress_at: str | None = None  # ... and is: the position of the loop that reports progress there
    strategy: str = ""  # how the work is mapped to threads, for `dace-cpufree inspect`
    block: int = 0  # the block (modulo the grid) that runs a BLOCK or THREAD item (EACH: the warp); the leader's is 0
    regions: tuple = ()  # (container, "R"/"W", subset) of a BLOCK/THREAD item: finer than reads/writes
    row: object = None  # how a map step can run row by row (``rows.RowCandidate``), for tile-local fusion
    source: str = ""  # "file:line" of the program construct the item comes from, where DaCe recorded it
    # The block function whose blocks run the item (``facts.BlockPart``; ``None``: the whole grid). Its
    # code sees the part's blocks as its grid (``__block``, ``__blocks``, ``__tid``, ``__nthreads``).
    part: object = None
    collective: bool = False  # a library call that every thread of the whole grid makes together (gemm)
    # the threads a grid step can keep busy (its elements, a reduction's outputs), a symbolic expression of the
    # SDFG's symbols; ``None``: not known. Sizes the blocks of independent steps run side by side (concurrency.py).
    elements: str | None = None
    part_sync_before: bool = False  # a barrier of the part's blocks before it (``cpufree::part_sync``)
    # What a collective library call needs of the launch, as C++ constant expressions (``None``: nothing): the
    # threads of a block it is built for, and the dynamic shared memory of each block in bytes.
    block_threads: str | None = None
    dynamic_shared: str | None = None
    #: the name of a C++ callable taking a block size: whether the call runs its fast path in such blocks
    block_fits: str | None = None
    #: a library call's output tiles (C++) and the symbols they are counted from (``codegen/host.py`` kernel_builds)
    tiles: str | None = None
    tile_symbols: frozenset = frozenset()
    form: Form | None = None  # a map step's mapping to threads (``None``: not a map step)
    tile: int = 0  # a tile step's largest tile (``cpufree::with_tile<tile>``); 0: not tiled
    # containers in device memory that its code addresses on another PE only (a put's destination, a signal's
    # flag): named in the code (a step function takes their pointers), not accesses that need synchronisation
    remote: frozenset[str] = frozenset()
    # a tile step's code with its rows dealt out from a counter of the rows of its earlier runs (the counter's
    # name: a C++ variable of the kernel) and, given a second variable (its last tile size), a block barrier where
    # its tile size changes, for steps whose runs overlap (``overlap.py``); ``None``: not a fused row step
    dealt: object = None
    head: object = None  # a loop's first item with the channel: what it does (``channel.LoopHead``)

    @property
    def part_key(self):
        """``(scope, index)`` of the item's block function, or ``None``."""
        return None if self.part is None else (self.part.scope, self.part.index)


@dataclass(eq=False)
class Seq:
    children: list = field(default_factory=list)


@dataclass(eq=False)
class Loop:
    """``init; while (cond) { body; update; }``, or the do-while form when ``inverted``."""

    label: str
    init: Item | None
    cond: Item
    update: Item | None
    body: Seq
    inverted: bool = False
    update_before_condition: bool = True
    # the symbols that interstate assignments inside the loop set (loop variables aside)
    assigned: frozenset = frozenset()
    # The loop variable where every iteration has a value of its own (a constant nonzero stride, never assigned
    # in the body), and every symbol whose value changes from one iteration to the next (interstate assignments,
    # the variables of this loop and of the loops inside it): ``syncs.py`` tells two iterations' accesses apart.
    distinct: str | None = None
    varying: frozenset = frozenset()
    progress: bool = False  # the channel reports its iterations as progress (``loop_points``)
    progress_var: str | None = None  # ... read from this variable at the looks (``loop_points``)


@dataclass(eq=False)
class Branch:
    """``if (conds[0]) bodies[0] else if ... else bodies[-1]`` (a ``None`` condition is ``else``)."""

    conds: list  # list[Item | None]
    bodies: list  # list[Seq]


@dataclass(eq=False)
class Edge:
    src: int
    dst: int
    cond: Item | None  # None: unconditional
    assign: Item | None


@dataclass(eq=False)
class Graph:
    """An unstructured region: blocks joined by conditional edges, printed with labels and gotos."""

    label: str
    blocks: list  # list[Seq]
    edges: list  # list[Edge]


@dataclass(eq=False)
class Jump:
    kind: str  # "break", "continue" or "return"


def items(node, loops: bool = True):
    """Every Item under ``node``, in program order (``loops=False``: not those inside a loop under ``node``)."""
    if isinstance(node, Item):
        yield node
    elif isinstance(node, Seq):
        for child in node.children:
            yield from items(child, loops)
    elif isinstance(node, Loop):
        if loops:
            for part in (node.init, node.cond, node.body, node.update):
                if part is not None:
                    yield from items(part)
    elif isinstance(node, Branch):
        for cond, body in zip(node.conds, node.bodies):
            if cond is not None:
                yield from items(cond, loops)
            yield from items(body, loops)
    elif isinstance(node, Graph):
        for block in node.blocks:
            yield from items(block, loops)
        for edge in node.edges:
            for part in (edge.cond, edge.assign):
                if part is not None:
                    yield from items(part, loops)


def flatten(seq: Seq) -> list:
    """The children of ``seq`` in order, nested sequences flattened."""
    out = []
    for child in seq.children:
        if isinstance(child, Seq):
            out += flatten(child)
        else:
            out.append(child)
    return out


def seqs(node):
    """Every sequence under ``node``, outermost first. Each one's children are read after it is yielded, so a
    caller that replaces ``children`` of the sequence it was given sees the walk go on into the new children."""
    if isinstance(node, Seq):
        yield node
        for child in node.children:
            yield from seqs(child)
    elif isinstance(node, Loop):
        yield from seqs(node.body)
    elif isinstance(node, Branch):
        for body in node.bodies:
            yield from seqs(body)
    elif isinstance(node, Graph):
        for block in node.blocks:
            yield from seqs(block)
