"""Sizes that round a sum of fractions, written as integer roundings that survive DaCe's text round trips.

The frontend gives the slice ``x[1:M:3]`` the size ``ceiling(M/3 - 1/3)``. DaCe's library expansions (``Reduce``'s
``reduce_values`` map, for one) print a size with ``symstr`` and parse the text back, where ``M/3`` and ``1/3`` are
integer divisions: the reduction then covers ``int_floor(M, 3)`` elements, one short for M = 5 or 8 (upstream DaCe's
CPU build alike). :func:`round_library_sizes_as_integers` rewrites every ``ceiling(p/q)`` and ``floor(p/q)`` of an
integer ``p`` and a constant ``q`` in the memlets of library nodes as ``int_ceil(p, q)``/``int_floor(p, q)``, DaCe's
own integer roundings, which print and parse back as themselves.
"""

from __future__ import annotations

import dace
from dace import subsets
from dace.sdfg import nodes

from dace_cpufree.sizes import integer_rounding


def _range(rng: subsets.Range) -> None:
    rng.ranges = [tuple(integer_rounding(x) for x in r) for r in rng.ranges]


def round_library_sizes_as_integers(sdfg: dace.SDFG) -> None:
    """Rewrites the roundings of the module docstring in the memlets into and out of every library node of ``sdfg``
    and its nested SDFGs, in place: the sizes its expansion prints and parses back. Other memlets keep DaCe's form,
    which DaCe's validation compares with the sizes it computes afresh from strided ranges."""
    for sd in sdfg.all_sdfgs_recursive():
        for state in sd.states():
            for node in state.nodes():
                if not isinstance(node, nodes.LibraryNode):
                    continue
                for edge in state.in_edges(node) + state.out_edges(node):
                    for subset in (edge.data.subset, edge.data.other_subset):
                        if isinstance(subset, subsets.Range):
                            _range(subset)
