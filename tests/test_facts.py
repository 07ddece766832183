"""The typed facts of :mod:`dace_cpufree.facts` survive what DaCe does to an SDFG: ``copy.deepcopy``, inlining of a
nested SDFG and ``SDFG.to_json``/``SDFG.from_json``; and the prepared SDFG of a program keeps them through JSON."""

import copy

import dace
import shmem_programs as sp
from dace.sdfg import nodes
from dace.transformation.interstate import InlineSDFG

import dace_cpufree
from dace_cpufree.facts import (
    BlockFunction,
    BlockPart,
    CpufreeTasklet,
    HostCall,
    LaunchNeeds,
    ProductCall,
    WaitMark,
    as_block_function,
    map_tile,
    mark_state,
    placement,
    state_part,
    with_tile,
)
from dace_cpufree.vocabulary import PERSISTENT_SCHEDULE, PutForm

LAUNCH = LaunchNeeds("T()", "fits<double>", "bytes()", "tiles(M, N)", ("M", "N"))
PRODUCT = ProductCall("double", "M", "N", "K", "1", "0", "K", False, "N", True, "N")
CALL = HostCall(2, "f", ("f", "i"), ("f",), "p.py:3")
FACTS = {
    **placement("blocks", 3, ["_dest", "_flag"], lanes=4, exit_barrier=False),
    "launch": LAUNCH,
    "product": PRODUCT,
    "put": PutForm.ROWS,
    "put_hidden": True,
    "wait": WaitMark(7, "flags[0]", "p.py:9"),
    "channel": "call",
    "notify_tag": "residual",
    "call": CALL,
    "collective": "Allreduce at p.py:4",
    "ordered": True,
}


def _facts(node: CpufreeTasklet) -> dict:
    return {name: getattr(node, name) for name in FACTS}


def _sdfg() -> tuple[dace.SDFG, CpufreeTasklet, nodes.MapEntry]:
    sdfg = dace.SDFG("facts")
    sdfg.add_symbol("M", dace.int64)
    sdfg.add_array("A", [10], dace.float64)
    state = sdfg.add_state("s")
    tasklet = CpufreeTasklet("t", {}, {"_out": dace.pointer(dace.float64)}, "", **FACTS)
    state.add_node(tasklet)
    state.add_edge(tasklet, "_out", state.add_write("A"), None, dace.Memlet("A[0:10]"))
    _, entry, _ = state.add_mapped_tasklet(
        "m", {"i": "0:10"}, {}, "b = 1.0", {"b": dace.Memlet("A[i]")}, schedule=PERSISTENT_SCHEDULE, external_edges=True
    )
    with_tile(entry, 0)
    mark_state(state, BlockPart(1, 0, 2, "M + 1", True, "g__b", "M > 2 and M < 9"))
    return sdfg, tasklet, entry


def _found(sdfg: dace.SDFG):
    (state,) = sdfg.states()
    (tasklet,) = [n for n in state.nodes() if isinstance(n, CpufreeTasklet)]
    (entry,) = [n for n in state.nodes() if isinstance(n, nodes.MapEntry)]
    return state, tasklet, entry


def test_tasklet_state_and_map_facts_survive_deepcopy_and_json():
    sdfg, tasklet, entry = _sdfg()
    part = state_part(next(iter(sdfg.states())))
    assert part.elems == "M + 1" and part.requires == "M > 2 and M < 9"
    for copied in (copy.deepcopy(sdfg), dace.SDFG.from_json(sdfg.to_json())):
        state, other, map_entry = _found(copied)
        assert other is not tasklet and type(other) is CpufreeTasklet and _facts(other) == FACTS
        assert map_tile(map_entry) == 0 and map_entry.map.schedule == PERSISTENT_SCHEDULE
        again = state_part(state)
        assert (again.scope, again.index, again.count, again.inferred, again.name) == (1, 0, 2, True, "g__b")
        assert dace.symbolic.pystr_to_symbolic(again.elems) == dace.symbolic.pystr_to_symbolic(part.elems)
        assert again.requires  # the same condition (JSON may spell it as the expression printer does)
    assert other.has_side_effects(copied) and not CpufreeTasklet("plain").has_side_effects(copied)


def test_untiled_map_reads_as_the_grid_stride_loop():
    sdfg, _, entry = _sdfg()
    with_tile(entry, None)
    assert map_tile(entry) is None
    assert map_tile(_found(dace.SDFG.from_json(sdfg.to_json()))[2]) is None
    with_tile(entry, 256)
    assert map_tile(_found(copy.deepcopy(sdfg))[2]) == 256


def test_block_function_and_tasklet_facts_survive_inlining_and_json():
    inner = dace.SDFG("inner")
    inner.add_array("A", [10], dace.float64)
    istate = inner.add_state("s")
    tasklet = CpufreeTasklet("t", {}, {"_out": dace.pointer(dace.float64)}, "", **FACTS)
    istate.add_node(tasklet)
    istate.add_edge(tasklet, "_out", istate.add_write("A"), None, dace.Memlet("A[0:10]"))
    outer = dace.SDFG("outer")
    outer.add_array("A", [10], dace.float64)
    state = outer.add_state("s")
    node = state.add_nested_sdfg(inner, {}, {"A"})
    state.add_edge(node, "A", state.add_write("A"), None, dace.Memlet("A[0:10]"))
    part = BlockPart(0, 1, 2, "5", False, "g__b")
    json_copy = dace.SDFG.from_json(outer.to_json())
    assert _facts(next(n for n, _ in json_copy.all_nodes_recursive() if isinstance(n, CpufreeTasklet))) == FACTS

    sdfg2 = dace.SDFG("outer2")
    sdfg2.add_array("A", [10], dace.float64)
    state2 = sdfg2.add_state("s")
    fn = as_block_function(state2, state2.add_nested_sdfg(copy.deepcopy(inner), {}, {"A"}), part)
    state2.add_edge(fn, "A", state2.add_write("A"), None, dace.Memlet("A[0:10]"))
    for copied in (copy.deepcopy(sdfg2), dace.SDFG.from_json(sdfg2.to_json())):
        (found,) = [n for n, _ in copied.all_nodes_recursive() if isinstance(n, nodes.NestedSDFG)]
        assert type(found) is BlockFunction and found.part == part and found.sdfg.parent_nsdfg_node is found
    assert outer.apply_transformations_repeated(InlineSDFG) == 1
    (inlined,) = [n for n, _ in outer.all_nodes_recursive() if isinstance(n, CpufreeTasklet)]
    assert _facts(inlined) == FACTS


def test_a_prepared_program_keeps_its_facts_through_json():
    sdfg = dace_cpufree.persistent_sdfg(sp.concurrent, shmem_transport="proxy")
    before = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, CpufreeTasklet)]
    after = [n for n, _ in dace.SDFG.from_json(sdfg.to_json()).all_nodes_recursive() if isinstance(n, CpufreeTasklet)]
    assert before and [(n.label, _facts(n)) for n in after] == [(n.label, _facts(n)) for n in before]
    assert {n.put for n in before} == {None, PutForm.CONTIGUOUS, PutForm.STRIDED}  # puts, waits and quiets
    assert {n.executor for n in before} == {"block", "each"}
