"""Map parameters renamed where they are named like a data container of the kernel.

The kernel declares a map's parameters as C++ locals in the scope where the arrays are pointers of the same
names: a parameter ``i`` hides an array ``i`` and the code reads ``i[i]``. Programs rarely do that themselves, but
library expansions bring their own maps (``np.fft.fft``'s DFT over ``i, n``) into a program whose arrays may be
named ``i`` or ``n``. Only the parameter is renamed, as a symbol: in the scope's ranges, memlet subsets, tasklet
code and nested symbol mappings; the containers and the memlets' data keep their names.
"""

from __future__ import annotations

import dace
from dace.sdfg import nodes
from dace.sdfg.replace import replace_properties_dict
from dace.utils import find_new_name


def rename_map_parameters_named_like_data(sdfg: dace.SDFG) -> int:
    """Renames every map parameter of ``sdfg`` (and its nested SDFGs) that equals a container's name; returns how
    many it renamed."""
    renamed = 0
    containers = {name for sd in sdfg.all_sdfgs_recursive() for name in sd.arrays}
    for sd in sdfg.all_sdfgs_recursive():
        for state in sd.states():
            for entry in [n for n in state.nodes() if isinstance(n, nodes.MapEntry)]:
                for param in [p for p in entry.map.params if p in containers]:
                    new = find_new_name(param, containers | _names_in_scope(sd, state, entry))
                    _rename(state, entry, param, new)
                    renamed += 1
    return renamed


def _names_in_scope(sd: dace.SDFG, state: dace.SDFGState, entry: nodes.MapEntry) -> set[str]:
    """The names a new parameter of ``entry`` must not take: the SDFG's symbols, and the parameters and free symbols
    of the scope (inner maps included)."""
    scope = state.scope_subgraph(entry)
    names = set(map(str, sd.symbols)) | set(map(str, scope.free_symbols))
    for node in scope.nodes():
        if isinstance(node, nodes.MapEntry):
            names |= set(node.map.params)
    return names


def _rename(state: dace.SDFGState, entry: nodes.MapEntry, param: str, new: str) -> None:
    scope = state.scope_subgraph(entry, include_entry=False, include_exit=False)
    repl = {param: new}
    for node in scope.nodes():
        if not isinstance(node, nodes.AccessNode):  # an access node's property is the container's name
            replace_properties_dict(node, repl, sdfg=state.sdfg)
    symbol = {param: dace.symbolic.pystr_to_symbolic(new)}  # a symbol, not text: subsets keep their free symbols
    for edge in state.all_edges(*scope.nodes(), entry, state.exit_node(entry)):
        edge.data.replace(symbol)  # subsets and volume; the memlet's data stays
    entry.map.params = [new if p == param else p for p in entry.map.params]
