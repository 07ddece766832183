"""Memlet addresses, interstate code, tasklets and write-conflict resolutions as C++ text (symbolic expressions:
:mod:`dace_cpufree.cpp`).

Everything here is pure text generation: no toolkit is needed, so CPU tests can assert on it.
"""

from __future__ import annotations

import ast
import copy
import math
from io import StringIO

import dace
import sympy
from dace import data as dt
from dace import dtypes, subsets
from dace.codegen import cppunparse
from dace.frontend.operations import detect_reduction_type
from dace.sdfg.state import LoopRegion

from dace_cpufree.cpp import INDEX_T, cexpr
from dace_cpufree.errors import NotPersistableError


def kernel_symbols(sdfg: dace.SDFG) -> list[str]:
    """Symbols the kernel defines itself: loop variables and interstate assignment targets."""
    names = set(sdfg.symbols)
    for region in sdfg.all_control_flow_regions():
        if isinstance(region, LoopRegion) and region.loop_variable:
            names.add(region.loop_variable)
    for edge in sdfg.all_interstate_edges():
        names |= set(edge.data.assignments)
    return sorted(names)


def same_value(a, b) -> bool:
    """Whether two expressions (symbolic or text) are provably equal; unparsable ones compare as text."""
    try:
        return sympy.simplify(sympy.sympify(a) - sympy.sympify(b)) == 0
    except (TypeError, ValueError, sympy.SympifyError):
        return str(a) == str(b)


_WCR_OPS = {
    dtypes.ReductionType.Sum: "Sum",
    dtypes.ReductionType.Product: "Product",
    dtypes.ReductionType.Min: "Min",
    dtypes.ReductionType.Max: "Max",
    dtypes.ReductionType.Logical_And: "LogicalAnd",
    dtypes.ReductionType.Logical_Or: "LogicalOr",
    dtypes.ReductionType.Logical_Xor: "LogicalXor",
    dtypes.ReductionType.Bitwise_And: "BitwiseAnd",
    dtypes.ReductionType.Bitwise_Or: "BitwiseOr",
    dtypes.ReductionType.Bitwise_Xor: "BitwiseXor",
}


def wcr_op(wcr: str) -> str:
    """The runtime's operator (``cpufree::Op::Sum``, ...) of a write-conflict resolution."""
    kind = detect_reduction_type(wcr)
    if kind not in _WCR_OPS:
        raise NotPersistableError(
            f"write-conflict resolution '{wcr}' is not a sum, product, min, max or a logical or bitwise and, or, "
            "xor. Fix: reduce with one of those (np.sum, np.max, np.any, ...) or write the loop out."
        )
    return f"cpufree::Op::{_WCR_OPS[kind]}"


def flat_offset(desc: dt.Data, index: list) -> str:
    """Linear element offset of ``index`` (one expression per dimension) into ``desc``."""
    if isinstance(desc, dt.Scalar):
        return "0"
    terms = []
    for idx, stride in zip(index, desc.strides):
        if idx == 0:
            continue
        terms.append(f"({cexpr(idx)}) * ({cexpr(stride)})" if stride != 1 else f"({cexpr(idx)})")
    if desc.start_offset:
        terms.append(cexpr(desc.start_offset))
    return " + ".join(terms) if terms else "0"


def subset_offset(desc: dt.Data, subset: subsets.Subset) -> str:
    """Offset of the first element of a memlet subset."""
    return flat_offset(desc, [rb for rb, _, _ in subset.ndrange()])


def range_extents(rng: subsets.Range) -> list[str]:
    """Per-dimension iteration counts of a map range, clamped at zero."""
    return [f"cpufree::max_<{INDEX_T}>(0, {cexpr(s)})" for s in rng.size()]


class _InterstateRewriter(ast.NodeTransformer):
    """Rewrites data container names in interstate code into memory accesses."""

    def __init__(self, sdfg: dace.SDFG, pointers: set[str]):
        self.sdfg = sdfg
        self.pointers = pointers

    def visit_Subscript(self, node: ast.Subscript):
        name = node.value.id if isinstance(node.value, ast.Name) else None
        if name not in self.sdfg.arrays:
            return self.generic_visit(node)
        desc = self.sdfg.arrays[name]
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        index = [dace.symbolic.pystr_to_symbolic(ast.unparse(e)) for e in elts]
        if isinstance(desc, dt.Scalar) and name not in self.pointers:
            return ast.Name(id=name, ctx=node.ctx)
        offset = sum((i * s for i, s in zip(index, desc.strides)), desc.start_offset)
        return ast.parse(f"{name}[{dace.symbolic.symstr(offset)}]", mode="eval").body

    def visit_Name(self, node: ast.Name):
        desc = self.sdfg.arrays.get(node.id)
        if desc is not None and node.id in self.pointers:
            return ast.parse(f"{node.id}[0]", mode="eval").body
        return node


def _declared(names) -> cppunparse.CPPLocals:
    scope = cppunparse.CPPLocals()
    for name in names:
        scope.define(name, 0, 0)
    return scope


def interstate_code(code: str, sdfg: dace.SDFG, pointers: set[str]) -> str:
    """C++ expression or statement for interstate code (conditions, assignments, loop headers).

    :param pointers: data containers that live in device memory (read through ``name[...]``).
    """
    tree = _InterstateRewriter(sdfg, pointers).visit(ast.parse(code))
    ast.fix_missing_locations(tree)
    out = StringIO()
    cppunparse.CPPUnparser(tree, 0, _declared(set(kernel_symbols(sdfg)) | set(sdfg.arrays)), out, expr_semicolon=False)
    return out.getvalue().strip()


def _call_args(node: ast.AST, name: str, count: int) -> list[ast.expr] | None:
    """The arguments of ``node`` if it is a call of ``name`` with ``count`` positional arguments, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and len(node.args) == count
        and not node.keywords
    ):
        return node.args
    return None


def _runtime_call(name: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=[])


#: Python's ``math`` functions that the C math library (CUDA's and HIP's device one too) has under the same name.
_C_MATH = frozenset(
    "acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp2 expm1 fabs floor fmod hypot "
    "isfinite isinf isnan ldexp lgamma log log10 log1p log2 pow sin sinh sqrt tan tanh trunc".split()
)
_C_MATH_RENAMED = {"gamma": "tgamma"}
_MATH_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_MATH_MACROS = {"inf": "INFINITY", "nan": "NAN"}


def _negative_whole(node: ast.expr) -> int | None:
    """``k`` where ``node`` is the literal ``-k`` of a whole number ``k > 0`` (``-2``, ``-2.0``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and node.value < 0:
        value = -node.value
    else:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or int(value) != value:
        return None
    return int(value)


class _TaskletMath(ast.NodeTransformer):
    """Python code whose C++ namesake computes something else, rewritten to the runtime's NumPy-exact functions.

    ``round(x)`` (Python's, and DaCe's translation of ``np.rint``) rounds halves to even, C's ``round`` away
    from zero. DaCe writes ``np.spacing(x)`` as ``nextafter(x, inf) - x`` (positive below zero, where NumPy's
    is negative) and ``np.logaddexp(x, y)`` as ``log(exp(x) + exp(y))`` (infinite once ``exp`` overflows, at
    89 in float32).
    """

    def __init__(self, tasklet: dace.nodes.Tasklet):
        self.tasklet = tasklet
        # the tasklet's own values: its connectors and the locals it assigns; any other name is a symbol
        self.values = set(tasklet.in_connectors) | set(tasklet.out_connectors)
        for stmt in tasklet.code.code:
            self.values |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}

    def visit_Attribute(self, node: ast.Attribute):
        """``math.cos``, ``math.pi``, ... (Python tasklets of DaCe's library expansions, e.g. ``np.fft.fft``'s):
        the C function or the constant's value, as DaCe's own generator maps the module."""
        if not (isinstance(node.value, ast.Name) and node.value.id == "math"):
            return self.generic_visit(node)
        name = node.attr
        if name in _C_MATH or name in _C_MATH_RENAMED:
            return ast.copy_location(ast.Name(id=_C_MATH_RENAMED.get(name, name), ctx=ast.Load()), node)
        if name in _MATH_CONSTANTS:
            return ast.copy_location(ast.Constant(_MATH_CONSTANTS[name]), node)
        if name in _MATH_MACROS:
            return ast.copy_location(ast.Name(id=_MATH_MACROS[name], ctx=ast.Load()), node)
        raise NotPersistableError(
            f"tasklet '{self.tasklet.label}' uses math.{name}, which has no C counterpart in the persistent kernel. "
            "Fix: compute it with NumPy functions or arithmetic in the program."
        )

    def visit_Call(self, node: ast.Call):
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id, func.attr) == ("math", "log")
            and len(node.args) == 2
        ):  # math.log(x, base): log(x) / log(base), a quotient of doubles
            self.generic_visit(node)
            x, base = (_runtime_call("log", [a]) for a in node.args)
            return ast.copy_location(ast.BinOp(left=x, op=ast.Div(), right=base), node)
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "round":
            if len(node.args) != 1 or node.keywords:
                raise NotPersistableError(
                    f"tasklet '{self.tasklet.label}' calls round() with a number of digits, which the persistent "
                    "kernel does not implement. Fix: scale by a power of ten, round(x), and scale back."
                )
            return _runtime_call("py_round", node.args)
        (value,) = _call_args(node, "reciprocal", 1) or (None,)
        if value is not None and not self.values & {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}:
            # DaCe prints a symbolic 1 / x (np.fft.ifft's 1 / N) as reciprocal(x): sympy's real number, not the
            # integer quotient of np.reciprocal, whose operand is the tasklet's own value
            return _runtime_call("py_pow_neg", [value, ast.Constant(1)])
        for log, exp in (("log", "exp"), ("log2", "exp2")):
            (total,) = _call_args(node, log, 1) or (None,)
            if isinstance(total, ast.BinOp) and isinstance(total.op, ast.Add):
                x, y = _call_args(total.left, exp, 1), _call_args(total.right, exp, 1)
                if x and y:
                    return _runtime_call(f"np_logaddexp{log[3:]}", x + y)
        return node

    def visit_BinOp(self, node: ast.BinOp):
        self.generic_visit(node)
        if isinstance(node.op, ast.Div):
            # Python's quotient, a float also of two integers (C's truncates: np.mean of an integer array divides its
            # integer sum by the count; a / b * b of integers is a in Python); a float operand divides as before
            return _runtime_call("py_div", [node.left, node.right])
        power = _negative_whole(node.right) if isinstance(node.op, ast.Pow) else None
        if power is not None:  # Python's x ** -k is a float for an integer x; C's 1 / x**k divides integers
            return _runtime_call("py_pow_neg", [node.left, ast.Constant(power)])
        args = _call_args(node.left, "nextafter", 2)
        if (
            isinstance(node.op, ast.Sub)
            and args
            and isinstance(args[1], ast.Name)
            and args[1].id == "inf"
            and ast.dump(args[0]) == ast.dump(node.right)
        ):
            return _runtime_call("np_spacing", [node.right])
        return node


def tasklet_code(tasklet: dace.nodes.Tasklet, defined: dict[str, dace.typeclass]) -> str:
    """C++ statements for a tasklet's body, its connectors already declared as locals."""
    if tasklet.language == dace.Language.CPP:
        return tasklet.code.as_string
    if tasklet.language != dace.Language.Python:
        raise NotImplementedError(f"tasklet language {tasklet.language}")
    out = StringIO()
    for stmt in tasklet.code.code:
        stmt = ast.fix_missing_locations(_TaskletMath(tasklet).visit(copy.deepcopy(stmt)))
        cppunparse.CPPUnparser(stmt, 0, _declared(defined), out, defined_symbols=dict(defined))
    return out.getvalue().strip()
