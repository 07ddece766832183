"""Sizes that round a sum of fractions, written as integer roundings that survive DaCe's text round trips.

The frontend gives the slice ``x[1:M:3]`` the size ``ceiling(M/3 - 1/3)``. DaCe's library expansions (``Reduce``'s
``reduce_values`` map, for one) print a size with ``symstr`` and parse the text back, where ``M/3`` and ``1/3`` are
integer divisions: the reduction then covers ``int_floor(M, 3)`` elements, one short for M = 5 or 8 (upstream DaCe's
CPU build alike). :func:`round_sizes_as_integers` rewrites every ``ceiling(p/q)`` and ``floor(p/q)`` of an integer
``p`` and a constant ``q`` in the SDFG's shapes, memlets and map ranges as ``int_ceil(p, q)``/``int_floor(p, q)``,
DaCe's own integer roundings, which print and parse back as themselves.
"""

from __future__ import annotations

import dace
from dace import data as dt
from dace import subsets
from dace.sdfg import nodes

from dace_cpufree.sizes import integer_rounding


def _range(rng: subsets.Range) -> None:
    rng.ranges = [tuple(integer_rounding(x) for x in r) for r in rng.ranges]


def round_sizes_as_integers(sdfg: dace.SDFG) -> None:
    """Rewrites the roundings of the module docstring in ``sdfg`` and its nested SDFGs, in place."""
    for sd in sdfg.all_sdfgs_recursive():
        for desc in sd.arrays.values():
            if isinstance(desc, dt.Array):
                desc.shape = tuple(integer_rounding(s) for s in desc.shape)
                desc.strides = tuple(integer_rounding(s) for s in desc.strides)
                desc.total_size = integer_rounding(desc.total_size)
        for state in sd.states():
            for node in state.nodes():
                if isinstance(node, nodes.MapEntry):
                    _range(node.map.range)
            for edge in state.edges():
                for subset in (edge.data.subset, edge.data.other_subset):
                    if isinstance(subset, subsets.Range):
                        _range(subset)
