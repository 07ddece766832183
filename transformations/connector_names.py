"""Tasklet connectors renamed where they are named like a container or symbol of an enclosing SDFG.

DaCe's validator refuses a tasklet connector named like an array, symbol or constant of the SDFG the tasklet is in.
Library expansions bring tasklets with connectors of their own choosing (``gemv_init`` writes through ``out``,
reductions read ``_in``) in nested SDFGs; inlining those into the program puts the tasklet beside the program's
arrays, and a program with an argument ``out`` is then invalid (upstream DaCe expands the nodes only at code
generation, after simplification, and never meets it). Only the connector is renamed: in the tasklet's code and on
its edges; the containers, memlets and the code's meaning are unchanged.
"""

from __future__ import annotations

import ast
import copy
import re

import dace
from dace.properties import CodeBlock
from dace.sdfg import nodes
from dace.utils import find_new_name


def rename_connectors_named_like_outer_data(sdfg: dace.SDFG) -> int:
    """Renames every tasklet connector of a nested SDFG of ``sdfg`` that equals the name of a container, symbol or
    constant of an SDFG enclosing it (where inlining would bring the tasklet); returns how many it renamed."""
    everything = {name for sd in sdfg.all_sdfgs_recursive() for name in _names(sd)}
    renamed = 0
    for sd in sdfg.all_sdfgs_recursive():
        outer = _enclosing_names(sd)
        if not outer:
            continue
        for state in sd.states():
            for node in state.nodes():
                if not isinstance(node, nodes.Tasklet):
                    continue
                connectors = set(node.in_connectors) | set(node.out_connectors)
                for conn in sorted(connectors & outer):
                    new = find_new_name(conn, everything | connectors | _identifiers(node))
                    _rename(state, node, conn, new)
                    connectors = (connectors - {conn}) | {new}
                    renamed += 1
    return renamed


def _names(sd: dace.SDFG) -> set[str]:
    """The names a connector of a tasklet in ``sd`` must not take (what DaCe's validator checks)."""
    return set(sd.arrays) | set(map(str, sd.symbols)) | set(sd.constants_prop)


def _enclosing_names(sd: dace.SDFG) -> set[str]:
    """The names of every SDFG enclosing ``sd`` (empty for the top level)."""
    names = set()
    parent = sd.parent_sdfg
    while parent is not None:
        names |= _names(parent)
        parent = parent.parent_sdfg
    return names


def _identifiers(node: nodes.Tasklet) -> set[str]:
    """Every identifier in the tasklet's code (a new connector name must not capture one)."""
    return set(re.findall(r"[A-Za-z_]\w*", node.code.as_string))


def _rename(state: dace.SDFGState, node: nodes.Tasklet, conn: str, new: str) -> None:
    """``conn`` of ``node`` renamed to ``new`` in its code, its connector dictionaries (order and types kept) and
    its edges."""
    code = node.code
    if code.language == dace.Language.Python:
        renamer = _RenameName(conn, new)
        node.code = CodeBlock([renamer.visit(stmt) for stmt in copy.deepcopy(code.code)], code.language)
    else:
        node.code = CodeBlock(re.sub(rf"\b{re.escape(conn)}\b", new, code.as_string), code.language)
    if conn in node.in_connectors:
        node.in_connectors = {new if k == conn else k: v for k, v in node.in_connectors.items()}
        for edge in state.in_edges(node):
            if edge.dst_conn == conn:
                edge.dst_conn = new
    if conn in node.out_connectors:
        node.out_connectors = {new if k == conn else k: v for k, v in node.out_connectors.items()}
        for edge in state.out_edges(node):
            if edge.src_conn == conn:
                edge.src_conn = new


class _RenameName(ast.NodeTransformer):
    """Renames one variable (``ast.Name``, read or written) of Python code; attributes and keywords keep theirs."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            node.id = self.new
        return node
