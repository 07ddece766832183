"""Host callbacks inside a persistent kernel: ``print(...)`` and calls of Python functions DaCe cannot parse.

DaCe turns such a call into a Python tasklet with ``side_effects`` set whose code calls a symbol of type
``dace.callback`` (``print(__in_x)``, ``__out_y = f(__in_a, __in_b)``), with its scalar arguments on input
connectors ``__in_<name>``, a result on an output connector ``__out_<name>``, and a ``__pystate`` scalar read and
written by every callback to keep them in program order. Constant arguments (the strings of a ``print``) are not
in the tasklet: DaCe's wrapper of the callable (``program.__sdfg_closure__()``) puts them back.

:func:`host_callbacks` rewrites each such tasklet into a C++ tasklet run by the leader thread that calls the host
through the device <-> host channel's call slot (``cpufree::channel::call``, see ``docs/channel.md``): the same
input and output edges, so the generator's synchronisation analysis orders the result's readers after it (a grid
sync before the other threads use it), and the ``__pystate`` chain keeps the calls in program order. The tasklet
(a :class:`~dace_cpufree.facts.CpufreeTasklet`, ``channel = "call"``) carries the call's facts (``call``, a
:class:`~dace_cpufree.channel_marks.HostCall`), which is where the generator reads them
(:func:`dace_cpufree.codegen.channel.program_calls`). The callback's symbol is
removed from the SDFG: the kernel does not take the function as an argument.

Scalars only: a call that passes an array, returns several values or an untyped value, or sits inside a parallel
loop is refused with the call, its line and a fix. Symbols and expressions of symbols (``print(t)`` of a loop
variable, ``N - t``) are evaluated by the kernel and travel as numbers.``print`` makes its callback
through a replacement of ours (:func:`dace_cpufree.frontend.channel_calls.print_callback`).
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass

import dace
from dace import data as dt
from dace.sdfg import nodes
from dace.sdfg.type_inference import infer_expr_type

from dace_cpufree.channel_marks import call_code
from dace_cpufree.cpp import cexpr
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.facts import CpufreeTasklet, HostCall

from .channel_calls import PRINT_CALLBACKS

#: How to write a scan that persistent kernels run (a loop carried by one thread per step).
SCAN_FIX = "write the scan as a loop: out[0] = a[0], then for i in range(1, N): out[i] = out[i - 1] * a[i]"


def _where(node) -> str:
    info = getattr(node, "debuginfo", None)
    if info is not None and info.filename and info.start_line:
        return f"{info.filename}:{info.start_line}"
    return ""


def _kind(dtype) -> str | None:
    """The call slot's word kind of a scalar type (``None``: not a number)."""
    if isinstance(dtype, dace.pointer):
        dtype = dtype.base_type
    if dtype == dace.bool_:
        return "b"
    try:
        kind = dtype.as_numpy_dtype().kind
    except (AttributeError, TypeError):
        return None
    return {"f": "f", "i": "i", "u": "i", "b": "b"}.get(kind)


def _call(node: nodes.Tasklet) -> tuple[ast.Call | None, str | None]:
    """The call in a callback tasklet's code and the name of the output connector it assigns (if any)."""
    code = node.code.code if isinstance(node.code.code, list) else []
    if len(code) != 1:
        return None, None
    stmt = code[0]
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return stmt.value, None
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        if isinstance(target, ast.Name):
            return stmt.value, target.id
    return None, None


def _in_map(state, node) -> bool:
    """Whether ``node`` runs inside a parallel loop (of its state, or of any state holding its nested SDFG)."""
    while state is not None:
        if state.entry_node(node) is not None:
            return True
        nsdfg = state.sdfg.parent_nsdfg_node
        node, state = nsdfg, state.sdfg.parent
    return False


def _refuse(name: str, where: str, problem: str, fix: str):
    at = f" at {where}" if where else ""
    raise NotPersistableError(f"the host callback {name}(...){at} {problem}. Fix: {fix}")


def host_callbacks(sdfg: dace.SDFG) -> list[HostCall]:
    """Rewrites every callback tasklet of ``sdfg`` (nested SDFGs too) into a call through the channel; returns the
    calls, by id. Raises :class:`NotPersistableError` naming a call that cannot be served and the fix."""
    calls = []
    rewritten = set()  # (sdfg, symbol) whose symbol is no longer used
    for node, state in list(sdfg.all_nodes_recursive()):
        if not (isinstance(node, nodes.Tasklet) and node.side_effects and node.language == dace.Language.Python):
            continue
        owner = state.sdfg
        call, result = _call(node)
        where = _where(node)
        func = ast.unparse(call.func) if call is not None else node.label
        ctype = owner.symbols.get(func) if call is not None else None
        if call is None or not isinstance(ctype, dace.callback):
            _refuse(func, where, "is not a plain call of a Python function", "call it as f(x, y) or y = f(x)")
        name = owner.callback_mapping.get(func, func)
        if name.startswith("numpy_"):  # DaCe's name for a NumPy function it has no implementation of
            numpy_name = "np." + name[len("numpy_") :]
            _refuse(
                numpy_name,
                where,
                "has no DaCe implementation, so it would run on the host with the kernel's arrays",
                SCAN_FIX
                if numpy_name == "np.cumprod"
                else "write it with loops or NumPy functions DaCe supports, or call it before or after the program",
            )
        if _in_map(state, node):
            _refuse(
                name,
                where,
                "is inside a parallel loop, where every thread would call the host",
                "call it outside the dace.map (or the array expression), once per step",
            )
        if not ctype.is_scalar_function() or (result is None and ctype.return_types not in ([], [None])):
            _refuse(
                name,
                where,
                "returns several values or an array",
                "return one scalar per call, annotated: y: dace.float64 = f(x)",
            )
        in_edges = {e.dst_conn: e for e in state.in_edges(node) if e.dst_conn}
        out_edges = {e.src_conn: e for e in state.out_edges(node) if e.src_conn}
        args, texts, reads = _arguments(state, call, in_edges, out_edges, name, where)
        results, writes = [], {}
        if result is not None:
            edge = out_edges.get(result)
            desc = owner.arrays.get(edge.data.data) if edge is not None else None
            kind = _kind(desc.dtype) if desc is not None else None
            if desc is None or desc.total_size != 1 or kind is None:
                what = edge.data.data if edge is not None else result
                _refuse(
                    name,
                    where,
                    f"returns a value of unknown or non-scalar type (into '{what}')",
                    f"annotate the result: {what.rsplit('_', 1)[0] if what[-1].isdigit() else what}: "
                    f"dace.float64 = {name}(...)",
                )
            results.append(kind)
            writes["__r0"] = edge
        fact = HostCall(len(calls), name, tuple(args), tuple(results), where)
        calls.append(fact)
        _replace(state, node, fact, texts, reads, writes, in_edges, out_edges)
        rewritten.add((owner, func))
    for owner, func in rewritten:
        named = re.compile(rf"\b{re.escape(func)}\b")  # a call left in a tasklet's code (DaCe's free symbols omit it)
        if func in owner.symbols and not any(
            isinstance(n, nodes.Tasklet) and named.search(n.code.as_string) for n, _ in owner.all_nodes_recursive()
        ):
            owner.remove_symbol(func)
            nsdfg = owner.parent_nsdfg_node
            if nsdfg is not None:
                nsdfg.symbol_mapping.pop(func, None)
    return calls


def _arguments(state, call: ast.Call, in_edges: dict, out_edges: dict, name: str, where: str):
    """The kind, the C++ text and the read edge (by connector) of every argument of a callback's ``call``:
    numbers, scalars and one-element arrays read through an edge, symbols and symbolic expressions (the loop
    variable, ``N - t``) evaluated by the kernel. Raises naming an argument that cannot travel."""
    owner = state.sdfg
    args, texts, reads = [], [], {}
    for k, arg in enumerate(call.args):
        number = isinstance(arg, ast.Constant) and isinstance(arg.value, (int, float))
        if number and not isinstance(arg.value, bool):
            args.append("f" if isinstance(arg.value, float) else "i")
            texts.append(repr(arg.value))
            continue
        conn = arg.id if isinstance(arg, ast.Name) else None
        edge = in_edges.get(conn) if conn else None
        if edge is None and conn in out_edges and _one_element(owner, out_edges[conn]):
            # a one-element array (``y: dace.float64 = f(x)`` makes one): DaCe hands arrays to callbacks as
            # outputs; here its value travels, and the callback does not write it
            edge = _read_instead(state, out_edges.pop(conn))
        desc = owner.arrays.get(edge.data.data) if edge is not None else None
        if conn in out_edges or (desc is not None and (not isinstance(desc, dt.Scalar) and desc.total_size != 1)):
            data = (edge or out_edges[conn]).data.data
            _refuse(
                name,
                where,
                f"passes the array '{data}'; only scalars travel to the host",
                f"pass the elements it needs ({data}[i]) or a reduction, or call it after the program",
            )
        if edge is not None:
            kind = _kind(desc.dtype)
            if kind is None:
                _refuse(name, where, f"passes '{edge.data.data}' of type {desc.dtype}", "pass numbers")
            args.append(kind)
            texts.append(f"__a{k}")
            reads[f"__a{k}"] = edge
            continue
        symbolic = _symbolic(owner, arg)
        if symbolic is not None:
            args.append(symbolic[0])
            texts.append(symbolic[1])
            continue
        _refuse(name, where, f"passes {ast.unparse(arg)}", "pass numbers, scalars or array elements")
    return args, texts, reads


def _symbolic(owner: dace.SDFG, arg: ast.expr) -> tuple[str, str] | None:
    """``(kind, C++ text)`` of an argument that is a symbol or an expression of symbols only (a loop variable, or
    ``2 * t`` where DaCe turned ``v = t * 2`` into a symbol), else ``None``."""
    functions = {n.func.id for n in ast.walk(arg) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    names = {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)} - functions  # Mod(t, 2): Mod is no symbol
    if not names or not names <= {str(k) for k in owner.symbols}:
        return None
    if any(isinstance(owner.symbols[n], dace.callback) for n in names):
        return None
    expr = dace.symbolic.pystr_to_symbolic(ast.unparse(arg))
    kind = _kind(infer_expr_type(expr, owner.symbols))
    return None if kind is None else (kind, cexpr(expr))


def _one_element(sdfg, edge) -> bool:
    desc = sdfg.arrays.get(edge.data.data)
    return desc is not None and desc.total_size == 1 and _kind(desc.dtype) is not None


def _read_instead(state, edge):
    """A read edge of the one element that ``edge`` (a tasklet's output) writes; the write is removed."""
    data = edge.data.data
    state.remove_edge(edge)
    if isinstance(edge.dst, nodes.AccessNode) and state.degree(edge.dst) == 0:
        state.remove_node(edge.dst)
    return _Read(state.add_read(data), None, dace.Memlet(data=data, subset="0"))


@dataclass
class _Read:
    """An input edge still to be made (by :func:`_replace`, on the new tasklet)."""

    src: object
    src_conn: str | None
    data: dace.Memlet


def _replace(state, node, fact: HostCall, texts, reads, writes, in_edges, out_edges) -> None:
    """``node`` replaced by a leader C++ tasklet calling the host; its edges kept (``__pystate`` passed through)."""
    owner = state.sdfg
    inputs = {conn: owner.arrays[e.data.data].dtype for conn, e in reads.items()}
    outputs = {conn: owner.arrays[e.data.data].dtype for conn, e in writes.items()}
    code = call_code(fact, texts, list(writes))
    state_in = "__istate" if "__istate" in in_edges else None  # DaCe's __pystate chain (program order)
    state_out = "__ostate" if "__ostate" in out_edges else None
    if state_in and state_out:
        inputs[state_in] = owner.arrays[in_edges[state_in].data.data].dtype
        outputs[state_out] = owner.arrays[out_edges[state_out].data.data].dtype
        code += f"\n{state_out} = {state_in};"
    new = CpufreeTasklet(
        f"host_call_{fact.name}_{fact.id}", inputs, outputs, code, channel="call", call=fact, ordered=True
    )
    new.debuginfo = node.debuginfo
    state.add_node(new)
    for conn, e in reads.items():
        state.add_edge(e.src, e.src_conn, new, conn, e.data)
    for conn, e in writes.items():
        state.add_edge(new, conn, e.dst, e.dst_conn, e.data)
    if state_in and state_out:
        e = in_edges[state_in]
        state.add_edge(e.src, e.src_conn, new, state_in, e.data)
        e = out_edges[state_out]
        state.add_edge(new, state_out, e.dst, e.dst_conn, e.data)
    for e in list(state.in_edges(node)) + list(state.out_edges(node)):
        if e.dst_conn is None and e.src_conn is None:  # dependency edges: kept on the new tasklet
            if e.dst is node:
                state.add_nedge(e.src, new, e.data)
            else:
                state.add_nedge(new, e.dst, e.data)
    state.remove_node(node)


def callables(program_or_sdfg, calls: list[HostCall]) -> dict:
    """The Python callable of each host callback, by name: the program's closure (DaCe's wrappers, which put the
    constant arguments back), else a builtin of that name (``print``). Raises naming one that is not found."""
    closure = {}
    if hasattr(program_or_sdfg, "__sdfg_closure__"):
        try:
            closure = program_or_sdfg.__sdfg_closure__()
        except Exception:  # noqa: BLE001 - a closure that cannot be evaluated now: fall back to builtins
            closure = {}
    found = {}
    for call in calls:
        fn = closure.get(call.name, PRINT_CALLBACKS.get(call.name, getattr(builtins, call.name, None)))
        if not callable(fn):
            raise NotPersistableError(
                f"the host callback {call.name}(...) at {call.source or 'an unknown line'} has no Python function "
                f"to call. Fix: compile the @dace.program itself (its closure holds {call.name}), not its SDFG."
            )
        found[call.name] = fn
    return found
