"""ScheduleThreads: how each step of a persistent kernel maps onto the fixed cooperative grid.

A persistent kernel is launched once with the largest co-resident grid, so a step cannot size its
own launch. This pass decides, per top-level map, a tile size: the kernel partitions every block
into tiles of that many threads (``cooperative_groups::tiled_partition<T>``); the lanes of a tile
cover the map's contiguous dimension and the tiles stride over its other dimensions, which the code
generator fuses into one loop (at most three of them, the rest run as sequential loops). A
reduction over the contiguous dimension becomes a reduction inside the tile; a reduction whose outputs
run along the contiguous dimension (columns) gets tiles whose warps split the reduced dimension.
"""

from __future__ import annotations

from typing import Any

import dace
from dace.properties import DictProperty, Property, make_properties
from dace.sdfg import nodes
from dace.sdfg.state import SDFGState
from dace.transformation import pass_pipeline as ppl

from dace_cpufree.errors import CpufreeError
from dace_cpufree.facts import with_tile
from dace_cpufree.vocabulary import PERSISTENT_SCHEDULE, contiguous_param

MAX_TILE = 1024  # tiles are at most this many threads; a block smaller than the tile gets smaller tiles


def _reduced_outputs(state: SDFGState, entry: nodes.MapEntry) -> list | None:
    """The map's output edges when every one is a write-conflict-resolved write, else ``None``."""
    outputs = [e for e in state.in_edges(state.exit_node(entry)) if not e.data.is_empty()]
    return outputs if outputs and all(e.data.wcr is not None for e in outputs) else None


def reduces(state: SDFGState, entry: nodes.MapEntry, param: str) -> bool:
    """Whether the map reduces over ``param``: every output is a write-conflict-resolved write from a
    tasklet whose location does not depend on ``param`` (a row of a matrix-vector product)."""
    outputs = _reduced_outputs(state, entry)
    return outputs is not None and all(param not in {str(s) for s in e.data.subset.free_symbols} for e in outputs)


def reduces_across(state: SDFGState, entry: nodes.MapEntry, param: str) -> bool:
    """Whether the map reduces over its other parameters into outputs indexed by ``param`` alone: every
    output is a write-conflict-resolved write at a location that, of the map's parameters, depends on
    ``param`` only (the columns of a transposed matrix-vector product, ``A.T @ y``, or a mean over axis
    0). Outputs indexed by more parameters (a matrix product's) are many enough for a thread each."""
    outputs = _reduced_outputs(state, entry)
    if len(entry.map.params) < 2 or outputs is None:
        return False
    params = set(entry.map.params)
    return all({str(s) for s in e.data.subset.free_symbols} & params == {param} for e in outputs)


def extent(entry: nodes.MapEntry, param: str):
    b, e, s = entry.map.range[list(entry.map.params).index(param)]
    return (e - b + s) // s


def static_tile(size) -> int:
    """The tile for a contiguous extent known at compile time: the power of two covering it."""
    t = 1
    while t < int(size) and t < MAX_TILE:
        t *= 2
    return t


@make_properties
class ScheduleThreads(ppl.Pass):
    """Chooses the tile size of every top-level map of a persistent SDFG.

    By default only maps that reduce over their contiguous dimension get tiles (a tile per output,
    lanes over the row, a tile reduction); ``elementwise=True`` tiles the other multi-dimensional
    maps too (a fused outer loop, lanes over tile-sized chunks of the contiguous dimension).
    Records the choice in the map's schedule (:func:`~dace_cpufree.facts.with_tile`): ``T`` the static
    tile (a power of two up to 1024 covering the contiguous extent, when that extent is known at
    compile time) or ``0`` when the extent is symbolic (the kernel then picks the power of two
    covering it at run time). Maps without a tile keep the plain grid-stride loop.
    ``tile_sizes`` overrides the choice per map label (a power of two); ``-1`` there keeps a map
    on the plain grid-stride loop.
    """

    CATEGORY = "dace-cpufree"

    tile_sizes = DictProperty(
        key_type=str, value_type=int, default={}, desc="Tile size per map label (overrides the choice)"
    )
    enabled = Property(dtype=bool, default=True, desc="Schedule maps onto tiles (else plain grid-stride)")
    elementwise = Property(
        dtype=bool,
        default=False,
        desc="Also tile maps that do not reduce their contiguous dimension (measured slower than the "
        "grid-stride loop on an H200, hence off by default)",
    )

    def __init__(self, tile_sizes: dict[str, int] | None = None, enabled: bool = True, elementwise: bool = False):
        super().__init__()
        self.tile_sizes = dict(tile_sizes or {})
        self.enabled = enabled
        self.elementwise = elementwise

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Nodes

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return False

    def apply_pass(self, sdfg: dace.SDFG, _: dict[str, Any]) -> dict[str, int]:
        labels = set()
        decisions = {}
        for state in sdfg.states():
            for node in state.nodes():
                if not isinstance(node, nodes.MapEntry) or node.map.schedule != PERSISTENT_SCHEDULE:
                    continue
                label = node.map.label
                labels.add(label)
                tile = self._tile(state, node) if self.enabled else None
                with_tile(node, tile)
                if tile is not None:
                    decisions[label] = tile
        unknown = sorted(set(self.tile_sizes) - labels)
        if unknown:
            raise CpufreeError(
                f"tile_sizes names maps that the persistent SDFG does not have: {', '.join(unknown)}. "
                f"Fix: use one of {', '.join(sorted(labels))} (see `dace-cpufree inspect`)."
            )
        return decisions

    def _tile(self, state: SDFGState, entry: nodes.MapEntry) -> int | None:
        label = entry.map.label
        if label in self.tile_sizes:
            tile = int(self.tile_sizes[label])
            if tile == -1:
                return None
            if tile < 1 or tile > MAX_TILE or tile & (tile - 1):
                raise CpufreeError(
                    f"tile size {tile} for map '{label}' is not a power of two between 1 and {MAX_TILE}. "
                    "Fix: pass a power of two (or -1 to keep the plain grid-stride loop)."
                )
            return tile
        param = contiguous_param(state, entry)
        if param is None:
            return None
        if reduces_across(state, entry, param):
            return 0  # the tile is picked at run time from the output and reduced extents (tile_for_columns)
        if not self.elementwise and not reduces(state, entry, param):
            return None
        size = extent(entry, param)
        return static_tile(size) if not dace.symbolic.issymbolic(size) else 0
