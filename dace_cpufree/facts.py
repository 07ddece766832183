"""Every fact that one stage of the compiler leaves on the SDFG for a later one, declared and typed.

The frontend, the library expansions and the passes write these facts; the code generator (and passes after the
writer) read them by attribute. Each is a DaCe property (or, on a state, one typed value), so it survives
``copy.deepcopy``, DaCe's SDFG copies and inlining, and ``SDFG.to_json``/``SDFG.from_json``.

On the tasklets of our expansions and calls (:class:`CpufreeTasklet`):

======================  ==========================  =====================================  =========================
fact                    type                        written by                             read by
======================  ==========================  =====================================  =========================
``executor``            one of :data:`EXECUTORS`    frontend/putmem.py (``placement``),    codegen/dataflow.py
                                                    signal_wait.py, allreduce.py,
                                                    transformations/put_order.py, gemm.py,
                                                    matvec_pairs.py
``block``               int                         the same                               codegen/dataflow.py
``lanes``               int                         frontend/putmem.py                     codegen/dataflow.py
``exit_barrier``        bool                        frontend/putmem.py                     codegen/dataflow.py
``remote``              list of connector names     putmem.py, allreduce.py, put_order.py  codegen/dataflow.py
``launch``              :class:`LaunchNeeds`        transformations/gemm.py                codegen/dataflow.py
``product``             :class:`ProductCall`        transformations/gemm.py,               transformations/
                                                    product_coefficients.py                product_coefficients.py
``put``                 ``vocabulary.PutForm``      frontend/putmem.py                     tests (kernel_steps.py)
``put_hidden``          bool                        frontend/putmem.py                     tests (kernel_steps.py)
``wait``                :class:`WaitMark`           frontend/signal_wait.py                codegen/channel.py
``channel``             one of :data:`CHANNEL_USES` frontend/channel_calls.py, callbacks.py codegen/channel.py
``notify_tag``          str or None                 frontend/channel_calls.py              codegen/channel.py
``call``                :class:`HostCall`           frontend/callbacks.py                  codegen/channel.py
``collective``          str                         frontend/allreduce.py                  vocabulary.collectives
``ordered``             bool                        channel_calls.py, callbacks.py,        DaCe's dead-code and
                                                    allreduce.py                           state-fusion passes
======================  ==========================  =====================================  =========================

Block functions of ``@mapgridscope`` (:class:`BlockPart`): frontend/gridscope.py makes each one a
:class:`BlockFunction` node (its ``part``); transformations/block_scopes.py inlines it and marks the states it became
(:func:`mark_state`), and after the persistent fusion the states its library steps were inlined into
(``mark_inlined_states``); codegen/lower.py reads a state's part (:func:`state_part`); early_puts.py and
communication.py carry the mark to the states they split off (:func:`copy_state_mark`).

The thread scheduler's tile of a map (``vocabulary.PersistentMap.tile``, the attribute of the map's schedule
``PERSISTENT_SCHEDULE(tile=...)``): written by transformations/schedule_threads.py, read by codegen/maps.py through
:func:`map_tile`.
"""

from __future__ import annotations

import dataclasses
import functools

import dace
import sympy
from dace.properties import ListProperty, Property, make_properties
from dace.sdfg import nodes

from dace_cpufree.vocabulary import PERSISTENT_SCHEDULE, PutForm

#: Who runs a tasklet outside a map (codegen/dataflow.py ``tasklet_item`` says what each one means).
EXECUTORS = ("leader", "grid", "block", "blocks", "thread", "each")
#: What a tasklet does with the device <-> host channel ("": nothing).
CHANNEL_USES = ("", "progress", "notify", "call")


@dataclasses.dataclass(frozen=True)
class HostCall:
    """One host callback of the program (a ``print`` or a Python function DaCe could not parse), as the kernel
    calls it through the channel's call slot.

    :ivar id: its number in the request's ``HEAD`` word (the index in ``ChannelFacts.calls``).
    :ivar name: the callback's name in the SDFG (its symbol; the callable is looked up by it).
    :ivar args: the kind of each argument word (``VALUE_KINDS`` of ``codegen/channel.py``); :ivar results: of each
        result word.
    :ivar source: ``file:line`` of the call in the program.
    """

    id: int
    name: str
    args: tuple = ()
    results: tuple = ()
    source: str = ""


@dataclasses.dataclass(frozen=True)
class LaunchNeeds:
    """What a grid-wide library call needs of the launch, as C++ constant expressions: the block size it is built
    for, the name of a callable taking a block size (whether the call runs its fast path in such blocks), bytes of
    dynamic shared memory per block, its output tiles (for the launcher's choice of build) and the symbols that
    count them (which the launcher must have)."""

    block_threads: str
    block_fits: str
    dynamic_shared: str
    tiles: str
    tile_symbols: tuple = ()


@dataclasses.dataclass(frozen=True)
class WaitMark:
    """A wait for a peer's signal, for the channel's hang reports: its number (``channel_marks.wait_fact``), the
    flag it waits on and the program line."""

    id: int
    flag: str
    source: str = ""


@dataclasses.dataclass
class ProductCall:
    """The arguments of one ``cpufree::gemm`` call: sizes and leading dimensions as C++ text, ``alpha`` and ``beta``
    as numbers or the names of the tasklet's scalar connectors that carry them. ``numpy_beta``: the call computes
    NumPy's ``alpha * (A @ B) + beta * C``, which reads C even where ``beta`` is 0 (``cpufree::gemm_numpy``), not
    BLAS's (C not read then)."""

    ctype: str
    m: str
    n: str
    k: str
    alpha: str
    beta: str
    lda: str
    trans_a: bool
    ldb: str
    trans_b: bool
    ldc: str
    numpy_beta: bool = False

    def code(self) -> str:
        # numpy_beta: the tasklet reads C through an input connector ``_cin`` too (the dataflow's read of C), the
        # same memory as ``_c``
        function, read_c = ("gemm_numpy", "(void)_cin; ") if self.numpy_beta else ("gemm", "")
        return (
            f"{read_c}cpufree::{function}<{self.ctype}, cpufree_build>((long long)({self.m}), (long long)({self.n}), "
            f"(long long)({self.k}), ({self.ctype})({self.alpha}), _a, (long long)({self.lda}), "
            f"{str(self.trans_a).lower()}, _b, (long long)({self.ldb}), {str(self.trans_b).lower()}, "
            f"({self.ctype})({self.beta}), _c, (long long)({self.ldc}));"
        )


@dataclasses.dataclass(frozen=True)
class BlockPart:
    """A block function's share of the grid (``@mapgridscope``): part ``index`` of ``count`` in block scope
    ``scope`` (one per call of a grid function). ``elems``: the elements of its declared range, or with
    ``inferred`` the work it does (iterations of its maps and copies), a symbolic expression of the program's
    symbols; the kernel splits its blocks by these at launch (``cpufree::split_blocks``). ``name``: the grid and
    block function, ``grid__block``."""

    scope: int
    index: int
    count: int
    elems: str
    inferred: bool
    name: str
    #: what the sizes must satisfy for the scope's block functions to touch no common element, where the
    #: frontend could not decide it for every size (Python syntax, ``and``/``or``; on part 0; checked before
    #: each launch: ``runtime.program``); ``""``: nothing to check
    requires: str = ""
    #: a step of an automatic scope (independent steps side by side, ``codegen/concurrency.py``): its share is
    #: computed where it runs, and only when the scope's steps have fewer elements than the grid has threads
    automatic: bool = False
    scope_elems: tuple = ()  # automatic: the element counts of every step of the scope, in part order

    def renamed(self, scope: int, symbols: dict) -> BlockPart:
        """The part in scope ``scope`` with its expressions in the caller's symbols (``symbols``: a nested SDFG's
        symbol mapping)."""

        def subs(text: str) -> str:
            if not text or not symbols:
                return text
            expr = dace.symbolic.pystr_to_symbolic(text)
            mapping = {dace.symbolic.symbol(k): dace.symbolic.pystr_to_symbolic(str(v)) for k, v in symbols.items()}
            return dace.symbolic.symstr(expr.subs(mapping)) if expr.free_symbols else text

        return dataclasses.replace(self, scope=scope, elems=subs(self.elems), requires=subs(self.requires))

    def symbols(self) -> set[str]:
        """The symbols its element count and condition read."""
        texts = (self.elems, self.requires)
        return {str(s) for t in texts if t for s in dace.symbolic.pystr_to_symbolic(t).free_symbols}


def _record_to_json(value):
    return None if value is None else dataclasses.asdict(value)


def _record_from_json(cls, obj, context=None):
    if obj is None:
        return None
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in obj.items()})


def _record(cls, desc: str) -> Property:
    """A property holding one ``cls`` (a dataclass) or None, kept in JSON as the dataclass's fields."""
    return Property(
        dtype=cls,
        allow_none=True,
        default=None,
        category="Code Generation",
        desc=desc,
        to_json=_record_to_json,
        from_json=functools.partial(_record_from_json, cls),
    )


def _put_from_json(obj, context=None):
    return None if obj is None else PutForm(obj)


@dace.serialize.serializable
@make_properties
class CpufreeTasklet(nodes.Tasklet):
    """A C++ tasklet of ours with what the later stages must know about it (the table in the module doc)."""

    executor = Property(dtype=str, default="leader", choices=EXECUTORS, category="Scheduling", desc="who runs it")
    block = Property(dtype=int, default=0, category="Scheduling", desc="its block (or lane), modulo the grid")
    lanes = Property(dtype=int, default=1, category="Scheduling", desc="'blocks': concurrent lanes of the grid")
    exit_barrier = Property(
        dtype=bool,
        default=True,
        category="Scheduling",
        desc="'blocks': a block barrier after it (False: its code "
        "promises that nothing after it in the block depends on its threads having finished)",
    )
    remote = ListProperty(
        element_type=str, default=[], category="Scheduling", desc="connectors that address another PE's memory"
    )
    launch = _record(LaunchNeeds, "a grid call's needs of the launch")
    product = _record(ProductCall, "the cpufree::gemm call it makes (for passes that change the call)")
    put = Property(
        dtype=PutForm,
        allow_none=True,
        default=None,
        category="Code Generation",
        desc="how a put moves the data",
        to_json=lambda v: None if v is None else v.value,
        from_json=_put_from_json,
    )
    put_hidden = Property(dtype=bool, default=False, category="Code Generation", desc="other work before its wait")
    wait = _record(WaitMark, "a wait for a peer's signal, for the channel's hang reports")
    channel = Property(dtype=str, default="", choices=CHANNEL_USES, category="Code Generation", desc="channel use")
    notify_tag = Property(dtype=str, allow_none=True, default=None, category="Code Generation", desc="string tag")
    call = _record(HostCall, "a host callback through the channel")
    collective = Property(
        dtype=str, default="", category="Code Generation", desc="a SHMEM collective every PE must enter: what it is"
    )
    ordered = Property(
        dtype=bool,
        default=False,
        category="Code Generation",
        desc="an effect outside the dataflow: DaCe keeps it "
        "and its place in program order (not a host callback: its code is device code)",
    )

    def __init__(self, label, inputs=None, outputs=None, code="", **facts):
        super().__init__(label, inputs, outputs, code, language=dace.Language.CPP)
        self.remote = []  # its own list, not the property's default
        for name, value in facts.items():
            if name not in _TASKLET_FACTS:
                raise TypeError(f"CpufreeTasklet has no fact '{name}'")
            setattr(self, name, value)

    def has_side_effects(self, sdfg) -> bool:
        return self.ordered or super().has_side_effects(sdfg)

    @staticmethod
    def from_json(json_obj, context=None):
        ret = CpufreeTasklet("dummylabel")
        dace.serialize.set_properties_from_json(ret, json_obj, context=context)
        return ret


_TASKLET_FACTS = frozenset(set(CpufreeTasklet.__properties__) - set(nodes.Tasklet.__properties__))


def placement(
    executor: str, block: int, remote: list[str] | None = None, lanes: int = 1, exit_barrier: bool = True
) -> dict:
    """The placement facts of a tasklet (keywords of :class:`CpufreeTasklet`)."""
    return {
        "executor": executor,
        "block": int(block),
        "remote": list(remote or []),
        "lanes": int(lanes),
        "exit_barrier": exit_barrier,
    }


def facts_of(node: nodes.Tasklet) -> CpufreeTasklet:
    """The facts of a tasklet: ``node`` itself where it is one of ours, else the defaults (DaCe's own tasklet runs
    on the leader thread and has no other fact)."""
    return node if isinstance(node, CpufreeTasklet) else _PLAIN


_PLAIN = CpufreeTasklet("plain")


# ---- block functions (@mapgridscope) ----


@dace.serialize.serializable
@make_properties
class BlockFunction(nodes.NestedSDFG):
    """The nested SDFG of a block function, with its part of the grid. The part's expressions count as symbols the
    node uses, so that DaCe keeps their definitions."""

    part = _record(BlockPart, "the block function's share of the grid")

    def used_symbols(self, all_symbols: bool) -> set[str]:
        return super().used_symbols(all_symbols) | (self.part.symbols() if self.part is not None else set())

    @staticmethod
    def from_json(json_obj, context=None):
        ret = BlockFunction("nolabel", dace.SDFG("nosdfg"), {}, {})  # as DaCe reads a NestedSDFG
        dace.serialize.set_properties_from_json(ret, json_obj, context)
        if ret.sdfg is not None:
            if context and "sdfg_state" in context:
                ret.sdfg.parent = context["sdfg_state"]
            if context and "sdfg" in context:
                ret.sdfg.parent_sdfg = context["sdfg"]
            ret.sdfg.parent_nsdfg_node = ret
            ret.sdfg.update_cfg_list([])
        return ret


def as_block_function(state: dace.SDFGState, node: nodes.NestedSDFG, part: BlockPart) -> BlockFunction:
    """``node`` (just added by ``state.add_nested_sdfg``, no edges yet) replaced by a :class:`BlockFunction`
    carrying ``part``."""
    new = BlockFunction(
        node.label, node.sdfg, node.in_connectors, node.out_connectors, node.symbol_mapping, debuginfo=node.debuginfo
    )
    new.no_inline, new.part = node.no_inline, part
    state.remove_node(node)
    state.add_node(new)
    node.sdfg.parent_nsdfg_node = new
    return new


class BlockPartMark(sympy.Atom):
    """A state's :class:`BlockPart`, as DaCe's state ``location`` holds it. That dictionary holds SymPy values
    (DaCe has no typed slot of its own on a state, nor a state class to extend), so the part is one SymPy atom
    under one key (``STATE_PART``): copies of the state copy it whole, and its JSON form is a call of its fields
    (numbers, expressions, the name as a symbol) that :func:`state_part` reads back."""

    def __new__(cls, part: BlockPart):
        obj = super().__new__(cls)
        obj.part = part
        return obj

    def __getnewargs__(self):
        return (self.part,)

    def _hashable_content(self):
        return (self.part,)

    def _sympystr(self, printer) -> str:
        p, sym = self.part, dace.symbolic.pystr_to_symbolic
        fields = [p.scope, p.index, p.count, sym(p.elems), int(p.inferred), sympy.Symbol(p.name)]
        fields.append(sym(p.requires) if p.requires else sympy.true)
        return f"{type(self).__name__}({', '.join(printer._print(sympy.sympify(f)) for f in fields)})"


#: The key of a state's part in its ``location``.
STATE_PART = "cpufree_part"


def mark_state(state: dace.SDFGState, part: BlockPart) -> None:
    """Marks ``state`` as a state of the block function ``part`` (its element count as the expression prints)."""
    elems = str(dace.symbolic.pystr_to_symbolic(part.elems))
    state.location = {STATE_PART: BlockPartMark(dataclasses.replace(part, elems=elems))}


def state_part(state: dace.SDFGState) -> BlockPart | None:
    """The part of a block function ``state`` belongs to, else ``None``."""
    mark = (state.location or {}).get(STATE_PART)
    if mark is None or isinstance(mark, BlockPartMark):
        return None if mark is None else mark.part
    # read back from JSON: a call of the fields in order (see BlockPartMark)
    scope, index, count, elems, inferred, name, requires = mark.args
    cond = "" if requires == sympy.true else dace.symbolic.symstr(requires)
    return BlockPart(int(scope), int(index), int(count), str(elems), bool(inferred), str(name), cond)


def copy_state_mark(source: dace.SDFGState, target: dace.SDFGState) -> None:
    """``target`` (split off ``source``) in the same block function's part as ``source``."""
    target.location = dict(source.location)


# ---- the thread scheduler's tiles ----


def with_tile(entry: nodes.MapEntry, tile: int | None) -> None:
    """Records the scheduler's choice for a map of the kernel: ``tile`` a static tile, 0 (chosen at run time from
    the contiguous extent) or None (the plain grid-stride loop)."""
    entry.map.schedule = PERSISTENT_SCHEDULE if tile is None else PERSISTENT_SCHEDULE(tile=tile)


def map_tile(entry: nodes.MapEntry) -> int | None:
    """The scheduler's choice for a map of the kernel (see :func:`with_tile`)."""
    schedule = entry.map.schedule
    return schedule.tile if schedule == PERSISTENT_SCHEDULE else None
