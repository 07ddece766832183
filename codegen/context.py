"""What the lowering of one SDFG to one kernel needs to know about its data and symbols."""

from __future__ import annotations

from dataclasses import dataclass, field

import dace
from dace import data as dt
from dace import subsets
from dace.sdfg import nodes
from dace.sdfg.state import LoopRegion
from dace.transformation.passes.analysis import loop_analysis

from dace_cpufree.cpp import cexpr
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.vocabulary import in_loop

from .expressions import flat_offset, subset_offset
from .loops import Dividers

# Element types that __ldg loads (CUDA and HIP overloads).
LDG_TYPES = frozenset(
    {
        "double",
        "float",
        "int",
        "unsigned int",
        "long long",
        "unsigned long long",
        "long",
        "short",
        "char",
        "signed char",
        "unsigned char",
        "int64_t",
        "int32_t",
        "uint64_t",
        "uint32_t",
        "int16_t",
        "uint16_t",
        "int8_t",
        "uint8_t",
    }
)


@dataclass
class KernelArg:
    """One parameter of the kernel and of its host launcher."""

    name: str
    ctype: str  # the element type
    kind: str  # "array" (device pointer), "scalar" (by value), "symbol" or "workspace"
    desc: dace.data.Data | None = None
    written: bool = True
    size: str | None = None  # workspace: C++ element count (an upper bound when the size varies in a loop)

    @property
    def pointer(self) -> bool:
        """A device pointer (an argument array or a workspace transient)."""
        return self.kind in ("array", "workspace")

    @property
    def read_only(self) -> bool:
        """A pointer the kernel never writes: declared ``__restrict__`` (:attr:`decl`). On a written array
        ``__restrict__`` lets nvcc keep a value in a register across grid.sync() although another thread
        changed it (seen on an H200: a while loop whose counter one thread increments never ended for the others).
        """
        return self.pointer and not self.written

    def restrict(self, race_check: bool) -> bool:
        """Whether the kernel declares it ``__restrict__`` (the race checker's recording pointers are not)."""
        return self.read_only and not race_check

    @property
    def decl(self) -> str:
        if self.pointer:
            return f"{self.ctype} *{' __restrict__' if self.read_only else ''} {self.name}"
        return f"{self.ctype} {self.name}"

    def kernel_decl(self, race_check: bool) -> str:
        """The declaration in the kernel: with ``race_check``, arrays record their accesses (racecheck.h)."""
        if race_check and self.pointer:
            return f"{pointer_type(self.ctype, True)}{self.name}"
        return self.decl


def pointer_type(ctype: str, race_check: bool) -> str:
    """C++ type of a pointer into a kernel array, followed by a space or ``*`` (the name comes next)."""
    return f"cpufree::race::ptr<{ctype}> " if race_check else f"{ctype} *"


@dataclass
class KernelContext:
    """Data placement of an SDFG in a persistent kernel.

    - non-transient arrays are kernel arguments (device pointers);
    - non-transient scalars are passed by value and must not be written;
    - transients touched only inside map scopes are thread-local arrays (registers);
    - every other transient lives in a device workspace allocated by the host launcher.
    """

    sdfg: dace.SDFG
    args: list[KernelArg] = field(default_factory=list)
    local: set[str] = field(default_factory=set)
    counter: int = 0
    views: dict = field(default_factory=dict)  # view -> (viewed container, element offset as C++)
    race_check: bool = False  # arrays are the race checker's recording pointers (emulation only)
    #: the divisors of flat-index decodes prepared in the kernel's prologue (``None``: none are, a nested SDFG's)
    dividers: Dividers | None = None
    #: containers whose one element the code being printed keeps in a variable (``rows.py``): name -> variable
    private: dict = field(default_factory=dict)
    #: element reads of read-only pointers printed so far (``read``): declaration -> (pointer, the ``__ldg`` form)
    loads: dict = field(default_factory=dict)

    def __post_init__(self):
        self._classify()
        self.dividers = Dividers(invariant_symbols(self.sdfg, self.args))

    @property
    def device(self) -> set[str]:
        """Containers in device memory, i.e. shared between threads (views of them included)."""
        names = {a.name for a in self.args if a.kind in ("array", "workspace")}
        return names | {v for v in self.views if self.root(v) in names}

    def root(self, name: str) -> str:
        """The container a view (of a view ...) aliases; ``name`` itself for any other container."""
        while name in self.views:
            name = self.views[name][0]
        return name

    def view_decls(self, names) -> list[str]:
        """Pointer declarations of the views among ``names`` (and the views they alias), outermost first."""
        order = []
        for name in sorted(names):
            chain = []
            while name in self.views and name not in order and name not in chain:
                chain.append(name)
                name = self.views[name][0]
            order += [v for v in reversed(chain) if v not in order]
        lines = []
        for v in order:
            target, offset = self.views[v]
            ptype = pointer_type(self.sdfg.arrays[v].dtype.ctype, self.race_check)
            lines.append(f"{ptype}{v} = {target} + ({offset});")
        return lines

    def loop_dividers(self, state) -> Dividers | None:
        """The prepared divisors for the steps of ``state`` when it runs in a loop of the kernel (``None`` outside
        loops). A step that runs once pays the division's dependent chain once, while a divider lives in a
        register from the prologue on: register-heavy kernels without a time loop grew (gemm 168 -> 212 registers
        per thread on sm_90, k2mm 175 -> 212, mlp 168 -> 188) for no gain."""
        return self.dividers if in_loop(state, across_nested=False) else None

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"__{prefix}{self.counter}"

    def access(self, name: str, subset) -> str:
        """C++ lvalue of the first element of ``name[subset]``."""
        if name in self.private:
            return self.private[name]
        desc = self.sdfg.arrays[name]
        if isinstance(desc, dt.Scalar) and name not in self.device and name not in self.local:
            return name
        return f"{name}[{subset_offset(desc, subset)}]"

    def read(self, var: str, ctype: str, name: str, subset) -> str:
        """The declaration ``const ctype var = name[subset];`` of an element read. Where ``name`` is a pointer the
        kernel declares ``__restrict__`` (never written) of a type ``__ldg`` loads, the read is kept as a fact
        (``loads``: the declaration -> its form through ``__ldg``), which a function a step runs in takes
        (``captures.Pointers``): nvcc proves that read-only property for the kernel but not for such a function,
        which takes the pointers as parameters."""
        target = self.access(name, subset)
        line = f"const {ctype} {var} = {target};"
        arg = None if name in self.private else next((a for a in self.args if a.name == name), None)
        if arg is not None and arg.pointer and arg.restrict(self.race_check) and arg.ctype in LDG_TYPES:
            self.loads[line] = (name, f"const {ctype} {var} = __ldg(&{target});")
        return line

    def element(self, name: str, index: list) -> str:
        return f"{name}[{flat_offset(self.sdfg.arrays[name], index)}]"

    def thread_owned(self, name: str, subset, owned: list[str]) -> bool:
        """Whether a write-conflict-resolved write to ``name[subset]`` reaches a location no other thread writes:
        the thread's own container, or one that the parameters ``owned`` (distributed over threads) determine."""
        return name in self.local or owns(subset, owned)

    def _classify(self):
        sdfg = self.sdfg
        scoped, unscoped = set(), set()
        for state in sdfg.states():
            sdict = state.scope_dict()
            for node in state.data_nodes():
                (scoped if sdict[node] is not None else unscoped).add(node.data)
        written = _written_containers(sdfg)
        for name, desc in sdfg.arglist().items():
            if isinstance(desc, dt.Scalar) and name in sdfg.arrays:
                if name in written:
                    raise NotPersistableError(
                        f"scalar argument '{name}' is written by the program; scalars are passed by value. "
                        f"Fix: pass it as a one-element array ({name}: dace.{desc.dtype.to_string()}[1])."
                    )
                self.args.append(KernelArg(name, desc.dtype.ctype, "scalar", desc))
            elif name in sdfg.arrays:
                self.args.append(KernelArg(name, desc.dtype.ctype, "array", desc, name in written))
            else:
                self.args.append(KernelArg(name, symbol_ctype(sdfg, name), "symbol"))
        for name, desc in sdfg.arrays.items():
            if not desc.transient:
                continue
            if isinstance(desc, dt.View):
                self.views[name] = _view_target(sdfg, name)
                continue
            if isinstance(desc, (dt.Reference, dt.Stream)):
                raise NotPersistableError(
                    f"container '{name}' is a {type(desc).__name__}, which persistent kernels do not support yet."
                )
            if name in scoped and name not in unscoped:
                self.local.add(name)
            else:
                size, extra = workspace_bound(sdfg, name, desc.total_size, {a.name for a in self.args})
                self.args.extend(KernelArg(sym, symbol_ctype(sdfg, sym), "symbol") for sym in extra)
                self.args.append(KernelArg(name, desc.dtype.ctype, "workspace", desc, size=size))


def owns(subset: subsets.Subset, params: list[str]) -> bool:
    """Whether each value of ``params`` writes a distinct location of ``subset`` (each is a dim index)."""
    dims = [rb for rb, _, _ in subset.ndrange()]
    for p in params:
        sym = dace.symbolic.symbol(p)
        if not any((d - sym).free_symbols.isdisjoint(set(map(dace.symbolic.symbol, params))) for d in dims):
            return False
    return True


def invariant_symbols(sdfg: dace.SDFG, args: list[KernelArg]) -> frozenset[str]:
    """The symbols whose value is the same everywhere in the kernel: symbol arguments that no loop or interstate
    assignment sets (in ``sdfg`` or the SDFGs nested in it)."""
    assigned = set()
    for inner in sdfg.all_sdfgs_recursive():
        for region in inner.all_control_flow_regions():
            if isinstance(region, LoopRegion) and region.loop_variable:
                assigned.add(str(region.loop_variable))
        for edge in inner.all_interstate_edges():
            assigned |= {str(s) for s in edge.data.assignments}
    return frozenset(a.name for a in args if a.kind == "symbol") - assigned


def workspace_bound(sdfg: dace.SDFG, name: str, size, known: set[str]) -> tuple[str, list[str]]:
    """``size`` with loop variables replaced by the bound that maximises it, so that the host can
    allocate the transient once: a transient sized by a loop variable (``C[i, :i + 1]`` in a loop)
    gets the largest size the loop reaches. Exact for sizes monotone in each loop variable. A size that
    depends on values the kernel computes is bounded by the arrays the transient is copied from or to
    (:func:`_copy_bound`). Returns the C++ expression and the symbols it needs that are not in ``known``
    (sizes of argument arrays, which the host infers from their shapes)."""
    ranges = {}
    for region in sdfg.all_control_flow_regions():
        if isinstance(region, LoopRegion) and region.loop_variable:
            start, end = loop_analysis.get_init_assignment(region), loop_analysis.get_loop_end(region)
            if start is not None and end is not None:
                ranges[region.loop_variable] = (start, end)
    candidates = [dace.symbolic.pystr_to_symbolic(size)]
    for _ in range(len(ranges) + 1):
        loose = sorted({str(s) for c in candidates for s in c.free_symbols if str(s) in ranges})
        if not loose:
            break
        sym = dace.symbolic.symbol(loose[0])
        candidates = list(dict.fromkeys(c.subs(sym, b) for c in candidates for b in ranges[loose[0]]))
    unknown = sorted({str(s) for c in candidates for s in c.free_symbols if str(s) not in known})
    if unknown:
        bound = _copy_bound(sdfg, name, known | _shape_symbols(sdfg))
        if bound is not None:
            text, needed = bound
            return text, sorted(needed - known)
        raise NotPersistableError(
            f"transient '{name}' has size {size}, which depends on {', '.join(unknown)}: the host cannot allocate "
            "it before the launch. Fix: give it a size computable from the arguments."
        )
    text = cexpr(candidates[0])
    for c in candidates[1:]:
        text = f"cpufree::max_<long long>({text}, {cexpr(c)})"
    return text, []


def _shape_symbols(sdfg: dace.SDFG) -> set[str]:
    """Symbols that are a whole dimension of an argument array: the host infers them from the array's shape."""
    return {
        str(dim)
        for name, desc in sdfg.arglist().items()
        if isinstance(desc, dt.Array)
        for dim in desc.shape
        if isinstance(dim, dace.symbolic.symbol)
    }


def _copy_bound(sdfg: dace.SDFG, name: str, known: set[str]) -> tuple[str, set[str]] | None:
    """A bound on the size of a transient sized by values the kernel computes (``A[start:stop]`` with ``start``
    read from an array), from the arrays its elements are copied from or to: a copy moves as many elements as
    the transient has, so its size is at most the other array's size. Transients of the same size expression
    share the bound (``x[cols]`` gathered into a transient as long as ``cols``). The bound and its symbols, or
    ``None`` if no such array has a size made of ``known`` symbols."""
    size = dace.symbolic.pystr_to_symbolic(sdfg.arrays[name].total_size)
    same = {
        other
        for other, desc in sdfg.arrays.items()
        if desc.transient and dace.symbolic.pystr_to_symbolic(desc.total_size) == size
    }
    bounds, needed = [], set()
    for state in sdfg.states():
        for edge in state.edges():
            if not (isinstance(edge.src, nodes.AccessNode) and isinstance(edge.dst, nodes.AccessNode)):
                continue
            for mine, other in ((edge.src, edge.dst), (edge.dst, edge.src)):
                if mine.data not in same or other.data in same:
                    continue
                total = dace.symbolic.pystr_to_symbolic(sdfg.arrays[other.data].total_size)
                if all(str(s) in known for s in total.free_symbols):
                    bounds.append(cexpr(total))
                    needed |= {str(s) for s in total.free_symbols}
    if not bounds:
        return None
    bounds = sorted(set(bounds))
    text = bounds[0]
    for b in bounds[1:]:
        text = f"cpufree::min_<long long>({text}, {b})"
    return text, needed


def symbol_ctype(sdfg: dace.SDFG, name: str) -> str:
    """Integer symbols are 64-bit in the kernel, whatever their declared width: they index memory."""
    dtype = sdfg.symbols.get(name, dace.int64)
    return "long long" if dtype in (dace.int8, dace.int16, dace.int32, dace.int64, dace.uint32) else dtype.ctype


def _view_target(sdfg: dace.SDFG, name: str) -> tuple[str, str]:
    """The container a view aliases and the offset of its first element, the same in every state."""
    found = set()
    for state in sdfg.states():
        for node in state.data_nodes():
            if node.data != name:
                continue
            edge = dace.sdfg.utils.get_view_edge(state, node)
            if edge is None:
                raise NotPersistableError(f"view '{name}' in state '{state.label}' is not connected to what it views.")
            other = edge.src if edge.dst is node else edge.dst
            if not isinstance(other, nodes.AccessNode):  # a window that moves with a map's iterations
                raise NotPersistableError(
                    f"view '{name}' in state '{state.label}' is a slice taken inside a map, per iteration "
                    f"({edge.data}); the kernel generator places views at fixed offsets. Fix: write the step on "
                    "whole arrays (a batched product C[:] = A @ B instead of C[i] = A[i] @ B in a map), or "
                    "index the elements in the map's body."
                )
            memlet = edge.data
            if memlet.data == other.data:
                subset = memlet.subset
            else:
                subset = memlet.other_subset if memlet.other_subset is not None else memlet.subset
            found.add((other.data, subset_offset(sdfg.arrays[other.data], subset)))
    if len(found) != 1:
        raise NotPersistableError(
            f"view '{name}' aliases {len(found)} different places in different states. "
            "Fix: give each slice its own name (simplify the SDFG first)."
        )
    return found.pop()


def is_view_edge(sdfg: dace.SDFG, state, edge) -> bool:
    """Whether an edge between two access nodes only defines a view (it copies nothing)."""
    for end in (edge.src, edge.dst):
        if isinstance(end, nodes.AccessNode) and isinstance(sdfg.arrays[end.data], dt.View):
            if dace.sdfg.utils.get_view_edge(state, end) is edge:
                return True
    return False


def _written_containers(sdfg: dace.SDFG) -> set[str]:
    written = set()
    views = {}
    for state in sdfg.states():
        for node in state.data_nodes():
            if isinstance(sdfg.arrays[node.data], dt.View):
                edge = dace.sdfg.utils.get_view_edge(state, node)
                if edge is not None:  # the viewed container: at the far end of the memlet path (through maps)
                    path = state.memlet_path(edge)
                    far = path[0].src if edge.dst is node else path[-1].dst
                    views[node.data] = far.data if isinstance(far, nodes.AccessNode) else edge.data.data
            if state.in_degree(node) > 0 and not all(is_view_edge(sdfg, state, e) for e in state.in_edges(node)):
                written.add(node.data)
    for name in list(written):
        while name in views:  # a write through a view writes what it aliases
            name = views[name]
            written.add(name)
    return written
