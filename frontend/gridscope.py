"""``@mapgridscope``: block functions that run concurrently on disjoint sets of the kernel's thread blocks.

A grid function, decorated ``@mapgridscope`` and called from a ``@dace.program``, holds block functions:
nested ``def``s, each the code that one set of thread blocks runs. ``@blocks[lo:hi]`` (DaCe's range notation,
one slice per dimension) declares the range a block function covers: the blocks are split in proportion to the
elements of each range, ``ceil(elems / total * blocks)``, at least one each. Without it the share is inferred
from the work (iterations of its maps and copies): a function with no more work than one block has threads
(boundary cells and their puts) gets one block, the others share the rest.

The grid function is a DaCe SDFG-convertible object (DaCe's frontend calls ``__sdfg__`` at the call site):
each block function is parsed by DaCe as a program of the grid function's parameters and becomes a nested SDFG
that DaCe does not inline (a :class:`~dace_cpufree.facts.BlockFunction`), carrying its
:class:`~dace_cpufree.facts.BlockPart`. Checks here, each naming the function and the fix: overlapping ranges,
ranges outside the arrays a function writes, a function reading or writing what another one writes.
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import linecache
import textwrap

import dace
import sympy
from dace import dtypes
from dace.frontend.python.common import SDFGConvertible
from dace.frontend.python.parser import DaceProgram
from dace.sdfg import nodes

from dace_cpufree.errors import NotPersistableError
from dace_cpufree.facts import BlockPart, as_block_function

from .putmem import Putmem

_scopes = itertools.count()  # one block scope per call of a grid function


class GridScopeError(NotPersistableError):
    """A grid function or one of its block functions cannot run as a block scope."""

    def __init__(self, message: str):
        super().__init__(message)
        self.__noskipcall__ = True  # DaCe's frontend must not turn the call into a host callback


class _Blocks:
    """``@blocks[lo:hi, ...]``: the range a block function covers (read from the source, never executed)."""

    def __getitem__(self, _):
        return lambda f: f

    def __call__(self, f):
        return f


#: Declares a block function's range: ``@blocks[0:N // 3]`` (bare ``@blocks``, or none: inferred share).
blocks = _Blocks()


class _BlockFunction:
    def __init__(self, node: ast.FunctionDef, ranges: list | None, where: str, text: str = ""):
        self.node, self.ranges, self.where, self.text = node, ranges, where, text
        self.name = node.name


def mapgridscope(f):
    """Makes ``f`` a grid function: its nested ``def``s are block functions that run concurrently on disjoint
    sets of the persistent kernel's thread blocks, with no grid sync between them. Call it from a
    ``@dace.program`` like a sub-program (``split_copy(A, B)``); see docs/mapgridscope.md."""
    return GridFunction(f)


class GridFunction(SDFGConvertible):
    """The object ``@mapgridscope`` makes of a function (see :func:`mapgridscope`)."""

    def __init__(self, f):
        self.f = f
        self.name = f.__name__
        self.filename = inspect.getsourcefile(f) or "<unknown>"
        lines, first = inspect.getsourcelines(f)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        ast.increment_lineno(tree, first - 1)
        fdef = tree.body[0]
        self._def = fdef
        args = fdef.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise GridScopeError(
                f"grid function '{self.name}' ({self._at(fdef)}) has default, keyword-only or variable "
                "arguments. Fix: give it plain annotated parameters, e.g. (A: dace.float64[N], B: dace.float64[N])."
            )
        self.params = [a.arg for a in args.args]
        self.block_functions = []
        for stmt in fdef.body:
            if isinstance(stmt, ast.FunctionDef):
                text = next((ast.unparse(d.slice) for d in stmt.decorator_list if isinstance(d, ast.Subscript)), "")
                self.block_functions.append(_BlockFunction(stmt, self._ranges(stmt), self._at(stmt), text))
            elif isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                continue  # a docstring
            else:
                raise GridScopeError(
                    f"grid function '{self.name}' has a statement outside its block functions ({self._at(stmt)}). "
                    "Fix: put it into a block function (a nested def), or before the call in the program."
                )
        if not self.block_functions:
            raise GridScopeError(
                f"grid function '{self.name}' ({self._at(fdef)}) defines no block function. Fix: nest one def per "
                "set of thread blocks, e.g. '@blocks[0:N // 2]\\n    def first(): ...'."
            )

    def _at(self, node) -> str:
        return f"{self.filename}:{node.lineno}"

    def _ranges(self, fdef: ast.FunctionDef) -> list | None:
        """The declared range of a block function as ``[(lo, hi), ...]`` (sympy), or ``None`` (inferred)."""
        if fdef.args.args or fdef.args.vararg or fdef.args.kwarg:
            raise GridScopeError(
                f"block function '{fdef.name}' of '{self.name}' ({self._at(fdef)}) has parameters; it sees the grid "
                "function's parameters. Fix: declare it as 'def " + fdef.name + "():'."
            )
        ranges = None
        for dec in fdef.decorator_list:
            if isinstance(dec, ast.Name) and dec.id == "blocks":
                continue
            if not (isinstance(dec, ast.Subscript) and isinstance(dec.value, ast.Name) and dec.value.id == "blocks"):
                raise GridScopeError(
                    f"block function '{fdef.name}' of '{self.name}' ({self._at(dec)}) has decorator "
                    f"'{ast.unparse(dec)}'. Fix: use '@blocks[lo:hi]' to declare its range, or no decorator."
                )
            dims = dec.slice.elts if isinstance(dec.slice, ast.Tuple) else [dec.slice]
            ranges = []
            for d in dims:
                if not isinstance(d, ast.Slice) or d.lower is None or d.upper is None or d.step is not None:
                    raise GridScopeError(
                        f"block function '{fdef.name}' of '{self.name}' ({self._at(dec)}) declares "
                        f"'{ast.unparse(d)}'. Fix: write each dimension as lo:hi, e.g. @blocks[0:N // 3]."
                    )
                ranges.append(tuple(dace.symbolic.pystr_to_symbolic(ast.unparse(x)) for x in (d.lower, d.upper)))
        return ranges

    # ---- DaCe's SDFG-convertible protocol ----

    def __sdfg_signature__(self):
        return self.params, []

    def __sdfg_closure__(self, reevaluate=None):
        return {}

    def __call__(self, *args, **kwargs):
        raise GridScopeError(
            f"grid function '{self.name}' was called from Python. Fix: call it inside a @dace.program compiled "
            "with dace_cpufree.compile (its block functions share the persistent kernel's thread blocks)."
        )

    def __sdfg__(self, *args, **kwargs) -> dace.SDFG:
        scope = next(_scopes)
        values = dict(zip(self.params, args))
        values.update(kwargs)
        missing = [p for p in self.params if p not in values]
        if missing:
            raise GridScopeError(f"grid function '{self.name}' called without {', '.join(missing)}.")
        subs = [self._block_sdfg(bf, values) for bf in self.block_functions]
        requires = self._check(subs)
        outer = dace.SDFG(self.name)
        for name in self.params:
            # the arrays as the caller gives them; scalars (a loop counter) as the block functions declare them
            desc = values[name] if isinstance(values[name], dace.data.Data) else subs[0].arrays.get(name)
            if desc is not None:
                outer.add_datadesc(name, copy.deepcopy(desc))
                outer.arrays[name].transient = False
        outer.arg_names = [p for p in self.params if p in outer.arrays]
        for sub in subs:
            for sym, stype in sub.symbols.items():
                if sym not in outer.symbols:
                    outer.add_symbol(sym, stype)
        state = outer.add_state(f"{self.name}_blocks")
        total = len(subs)
        for index, (bf, sub) in enumerate(zip(self.block_functions, subs)):
            reads, writes = _accessed(sub, local=False)
            # also what it uses outside dataflow (a scalar read on an interstate edge: a put's signal value)
            used = {n for n, d in sub.arrays.items() if not d.transient and n in outer.arrays}
            ins = {n for n in used if n in reads or n not in writes}
            outs = {n for n in writes if n in outer.arrays}
            mapping = {s: s for s in sub.free_symbols}
            node = state.add_nested_sdfg(sub, sorted(ins), sorted(outs), symbol_mapping=mapping)
            node.no_inline = True
            node.label = f"{self.name}__{bf.name}"
            part = BlockPart(
                scope, index, total, self._elems(bf, sub), bf.ranges is None, node.label, requires if index == 0 else ""
            )
            node = as_block_function(state, node, part)
            for name in ins:
                whole = dace.Memlet.from_array(name, outer.arrays[name])
                state.add_edge(state.add_read(name), None, node, name, whole)
            for name in outs:
                whole = dace.Memlet.from_array(name, outer.arrays[name])
                state.add_edge(node, name, state.add_write(name), None, whole)
        return outer

    # ---- parsing one block function ----

    def _block_sdfg(self, bf: _BlockFunction, values: dict) -> dace.SDFG:
        """The block function parsed by DaCe as a program of the grid function's parameters. Its source is the
        block function's body under a header with those parameters, registered with ``linecache`` at the same
        line numbers, so that DaCe's source lines (debug info, error messages) are those of the user's file."""
        fdef = bf.node
        params = ", ".join(ast.unparse(a) for a in self._def.args.args)
        header = f"def {self.name}__{bf.name}({params}):"
        all_lines = linecache.getlines(self.filename)
        body_first = fdef.body[0].lineno
        if fdef.body[0].lineno == fdef.lineno:
            raise GridScopeError(
                f"block function '{bf.name}' of '{self.name}' ({bf.where}) has its body on the def line. "
                "Fix: start the body on the next line."
            )
        lines = ["\n"] * (fdef.lineno - 1) + [header + "\n"]
        lines += ["\n"] * (body_first - fdef.lineno - 1) + all_lines[body_first - 1 : fdef.end_lineno]
        fake = f"<block function {self.name}.{bf.name} of {self.filename}>"
        linecache.cache[fake] = (sum(map(len, lines)), None, lines, fake)
        namespace = dict(self.f.__globals__)
        namespace.update(inspect.getclosurevars(self.f).nonlocals)
        exec(compile("".join(lines), fake, "exec"), namespace)  # noqa: S102 - the user's own source, re-headed
        program = DaceProgram(namespace[f"{self.name}__{bf.name}"], [], {}, False, dtypes.DeviceType.CPU)
        args = [values[p] for p in self.params]
        try:
            sdfg = program.to_sdfg(*args, simplify=True, save=False)
        except GridScopeError:
            raise
        except Exception as ex:
            raise GridScopeError(
                f"block function '{bf.name}' of '{self.name}' ({bf.where}) could not be parsed: {ex}"
            ) from ex
        for node, _ in sdfg.all_nodes_recursive():  # the user's file in debug info, not the re-headed copy
            info = getattr(node, "debuginfo", None)
            if info is not None and info.filename == fake:
                info.filename = self.filename
        for block in sdfg.all_control_flow_blocks():
            info = getattr(block, "debuginfo", None)
            if info is not None and info.filename == fake:
                info.filename = self.filename
        sdfg.name = f"{self.name}__{bf.name}"
        return sdfg

    def _elems(self, bf: _BlockFunction, sub: dace.SDFG) -> str:
        if bf.ranges is not None:
            return str(sympy.Mul(*[hi - lo for lo, hi in bf.ranges]))
        work = sympy.Integer(0)
        for state in sub.states():
            sdict = state.scope_dict()
            for node in state.nodes():
                if isinstance(node, nodes.MapEntry) and sdict[node] is None:
                    work += node.map.range.num_elements()
                elif isinstance(node, (nodes.Tasklet, nodes.LibraryNode)) and sdict[node] is None:
                    work += 1
            for e in state.edges():
                copy_edge = isinstance(e.src, nodes.AccessNode) and isinstance(e.dst, nodes.AccessNode)
                if copy_edge and not e.data.is_empty():
                    work += e.data.volume
        return str(work)

    # ---- checks across the block functions ----

    def _check(self, subs: list) -> str:
        """Raises where block functions provably conflict; returns what the sizes must satisfy where that depends
        on them (``BlockPart.requires``, checked before each launch), else ``""``."""
        conditions = []
        fns = self.block_functions
        accessed = [_accessed(s) for s in subs]
        for bf, sub, (_, writes) in zip(fns, subs, accessed):
            if bf.ranges is None:
                continue
            for name in writes:
                desc = sub.arrays[name]
                for d, (lo, hi) in enumerate(bf.ranges[: len(desc.shape)]):
                    if _provably(lo < 0) or _provably(hi > desc.shape[d]):
                        raise GridScopeError(
                            f"block function '{bf.name}' of '{self.name}' ({bf.where}) declares range "
                            f"[{bf.text}], outside '{name}' in dimension {d} (extent {desc.shape[d]}), which it "
                            "writes. Fix: declare the part of the array it covers."
                        )
        for (i, a), (j, b) in itertools.combinations(enumerate(fns), 2):
            if a.ranges is not None and b.ranges is not None and len(a.ranges) == len(b.ranges):
                pairs = zip(a.ranges, b.ranges)
                if not any(_provably(ha <= lb) or _provably(hb <= la) for (la, ha), (lb, hb) in pairs):
                    raise GridScopeError(
                        f"block functions '{a.name}' ({a.where}) and '{b.name}' ({b.where}) of '{self.name}' "
                        f"declare overlapping ranges [{a.text}] and [{b.text}]. Fix: give each "
                        "block function its own part of the range."
                    )
            for (x, rx), (y, ry) in (((a, accessed[i]), (b, accessed[j])), ((b, accessed[j]), (a, accessed[i]))):
                reads_x, writes_x = rx
                _, writes_y = ry
                for name, wsubs in writes_y.items():
                    for mode, mine in (("reads", reads_x.get(name, [])), ("writes", writes_x.get(name, []))):
                        for sub, w in ((sub, w) for sub in mine for w in wsubs):
                            apart = _apart(sub, w)
                            if apart is True:
                                continue
                            if apart is False:
                                raise GridScopeError(
                                    f"block function '{x.name}' ({x.where}) {mode} '{name}', which block function "
                                    f"'{y.name}' ({y.where}) of the same grid function '{self.name}' writes; block "
                                    "functions run at the same time. Fix: move the dependent step after the call of "
                                    f"'{self.name}' (or into the same block function)."
                                )
                            conditions.append(apart)
        return " and ".join(dict.fromkeys(conditions))


def _accessed(sdfg: dace.SDFG, local: bool = True) -> tuple[dict, dict]:
    """The subsets of each non-transient array that an SDFG reads and writes; with ``local``, a put's destination
    and flag are another PE's memory, not local writes."""
    reads, writes = {}, {}
    for state in sdfg.states():
        for node in state.data_nodes():
            if sdfg.arrays[node.data].transient:
                continue
            for e in state.in_edges(node):
                if e.data.is_empty() or (local and isinstance(e.src, Putmem) and e.src_conn in ("_dest", "_flag")):
                    continue
                sub = e.data.subset if e.data.data == node.data else e.data.other_subset
                writes.setdefault(node.data, []).append(sub)
            for e in state.out_edges(node):
                if e.data.is_empty():
                    continue
                sub = e.data.subset if e.data.data == node.data else e.data.other_subset
                reads.setdefault(node.data, []).append(sub)
    return reads, writes


def _provably(cond) -> bool:
    """Whether a comparison of size expressions holds for every positive integer value of its symbols."""
    cond = sympy.sympify(cond)
    if cond in (sympy.true, sympy.false):
        return bool(cond)
    diff = sympy.simplify(cond.lhs - cond.rhs) if hasattr(cond, "lhs") else None
    if diff is None:
        return False
    positive = {s: sympy.Symbol(str(s), positive=True, integer=True) for s in diff.free_symbols}
    res = sympy.sympify(cond.func(diff.subs(positive), 0))
    return res is sympy.true


def _apart(a, b):
    """Whether two subsets share no element: ``True``, ``False`` (they overlap for every size), or the condition on
    the sizes under which they are apart (Python text), where that depends on the sizes."""
    if a is None or b is None:
        return False
    meets = dace.subsets.intersects(a, b)
    if meets is not None:
        return not meets
    try:
        dims = list(zip(a.ndrange(), b.ndrange()))
    except (TypeError, AttributeError):
        return False
    alternatives = []
    for (l1, h1, _), (l2, h2, _) in dims:
        for lhs, rhs in ((h1, l2), (h2, l1)):
            if _provably(lhs < rhs):
                return True
            if _provably(lhs >= rhs):
                continue
            alternatives.append(f"({dace.symbolic.symstr(lhs)} < {dace.symbolic.symstr(rhs)})")
    if not alternatives:
        return False
    return "(" + " or ".join(alternatives) + ")"
