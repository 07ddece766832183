"""Everyday NumPy forms that DaCe's frontend refuses, rewritten in the program's source before DaCe parses it.

DaCe 2.0.0b1 stops at, or computes wrongly, five constructs NumPy users write every day:

- a slice with step ``-1`` (``x[::-1]``, ``A[1:-1, ::-1]``, ``x[n - 1:0:-1]``): "Negative strides are not
  supported"; read as ``np.flip`` of the slice with positive step over the same elements;
- a reduction of a boolean selection (``x[x > 0].sum()``, ``np.max(a[(a > lo) & (a < hi)])``, ``.mean()``,
  ``.min()``): "Boolean array indexing is only supported for assignment targets"; read as the
  reduction of ``np.where(mask, x, neutral)``, the mask checked to have the array's shape when DaCe builds it
  (:func:`mask_of`); any other boolean selection on the right-hand side has a length that depends on the data and
  is refused here with the line and a fix;
- ``np.array([a, b, c])`` of scalars that are not constants: a ``KeyError`` inside DaCe; read as
  :func:`array_of`, one tasklet writing a new 1-D array;
- an update of a strided slice (``x[::2] += y[::2]``, ``A[:, 1::2] *= 2``): DaCe writes ``x[i]`` for ``x[2 * i]``,
  a wrong answer (upstream DaCe alike); read as the assignment ``x[::2] = x[::2] + y[::2]``, which DaCe computes
  right;
- ``print(t)`` of a loop variable or of an expression of symbols: a ``TypeError`` inside DaCe; ``print`` is read as
  :func:`~.channel_calls.print_of`, whose replacement passes symbolic arguments as their values (only in the
  program compiled here: DaCe's ``print`` stays as it is for everyone else).

The rewrite edits the text of the function's lines only where a form occurs, keeping every line where it was, and
shows DaCe that text through :mod:`linecache` while it parses (DaCe reads a program's source with
:func:`inspect.getsource`); the program's file and line numbers stay the user's, so every later message points at
the user's code. A program with none of these forms is parsed as it is.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import inspect
import linecache
import os
import textwrap

import numpy as np
from dace.frontend.python import cached_program
from dace.frontend.python.parser import DaceProgram

from dace_cpufree.errors import NotPersistableError

from .channel_calls import print_of
from .form_calls import array_of, flip_of, mask_of

#: names the rewritten text calls, added to the program's globals for its parse only
_NP, _ARRAY_OF, _MASK_OF, _FLIP = "__cpufree_np", "__cpufree_array_of", "__cpufree_mask_of", "__cpufree_flip"
#: what those names stand for (the calls are registered with DaCe in :mod:`.form_calls`)
_PRINT = "__cpufree_print"
_CALLS = {_NP: np, _ARRAY_OF: array_of, _MASK_OF: mask_of, _FLIP: flip_of, _PRINT: print_of}
_REDUCTIONS = {"sum": "0", "max": None, "min": None, "mean": "0", "amax": None, "amin": None}
_MASK_CALLS = {"logical_and", "logical_or", "logical_not", "logical_xor", "isnan", "isinf", "isfinite"}


class _Forms(ast.NodeTransformer):
    """Rewrites the forms of the module docstring in a function's AST; each new node keeps the span of the node it
    replaces in ``_cpufree_span``, for the text edit."""

    def __init__(self, numpy_names: set[str], where: str, first_line: int, print_is_builtin: bool):
        self.numpy_names, self.where, self.first_line = numpy_names, where, first_line
        self.print_is_builtin = print_is_builtin
        self.changed = False

    def _np(self, attr: str) -> ast.expr:
        return ast.Attribute(value=ast.Name(id=_NP, ctx=ast.Load()), attr=attr, ctx=ast.Load())

    def _replace(self, old: ast.AST, new: ast.expr) -> ast.expr:
        new._cpufree_span = (old.lineno, old.col_offset, old.end_lineno, old.end_col_offset)
        self.changed = True
        return ast.copy_location(new, old)

    def _is_numpy_call(self, func: ast.expr, names) -> str | None:
        if isinstance(func, ast.Attribute) and func.attr in names:
            base = func.value
            if isinstance(base, ast.Name) and base.id in self.numpy_names:
                return func.attr
        return None

    def visit_Assign(self, node: ast.Assign):
        """``T[m] = f(Y[m])``: the selections on the right use the target's mask, so they read ``Y`` itself (DaCe
        assigns a whole array through a mask where the mask holds)."""
        target = node.targets[0] if len(node.targets) == 1 else None
        if isinstance(target, ast.Subscript) and _is_mask(target.slice, self.numpy_names):
            node.value = _SameMask(self, ast.dump(target.slice)).visit(node.value)
        self.generic_visit(node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign):
        """``x[::2] += v`` as ``x[::2] = x[::2] + v``: DaCe's frontend drops the step of an updated slice (the map
        writes ``x[i]``, not ``x[2 * i]``; upstream DaCe alike), and computes the assignment right."""
        self.generic_visit(node)
        target = node.target
        if not isinstance(target, ast.Subscript):
            return node
        dims = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        if not any(isinstance(d, ast.Slice) and d.step is not None and _constant(d.step) != 1 for d in dims):
            return node
        read = ast.Subscript(value=target.value, slice=target.slice, ctx=ast.Load())
        value = ast.BinOp(left=read, op=node.op, right=node.value)
        return self._replace(node, ast.Assign(targets=[target], value=value, lineno=node.lineno))

    def visit_Subscript(self, node: ast.Subscript):
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            flipped = _flipped(node)
            if flipped is not None:
                ascending = ast.unparse(flipped[0]) + ("[:]" if isinstance(flipped[0], ast.Name) else "")
                raise NotPersistableError(
                    f"the assignment to {ast.unparse(node)} at {self.where}:{self.first_line + node.lineno - 1} "
                    "writes with step -1, which DaCe cannot. Fix: assign to the same elements in ascending order and "
                    f"reverse the value instead: `{ascending} = value[::-1]` (reversed along axis {flipped[1][0]})."
                )
            return node
        if _is_mask(node.slice, self.numpy_names):
            line = self.first_line + node.lineno - 1
            raise NotPersistableError(
                f"the boolean selection {ast.unparse(node)} at {self.where}:{line} makes an array whose length "
                "depends on the data, and a kernel's arrays have fixed sizes. Fix: reduce it where it is "
                f"(`{ast.unparse(node)}.sum()`, `.max()`, `.mean()` work), keep the array's shape with "
                f"`np.where({ast.unparse(node.slice)}, {ast.unparse(node.value)}, 0)`, or assign through it "
                f"(`{ast.unparse(node.value)}[{ast.unparse(node.slice)}] = ...`)."
            )
        flipped = _flipped(node)
        if flipped is None:
            return node
        sliced, axes = flipped
        axis = ast.Constant(axes[0]) if len(axes) == 1 else ast.List([ast.Constant(a) for a in axes], ast.Load())
        call = ast.Call(func=ast.Name(id=_FLIP, ctx=ast.Load()), args=[sliced, axis], keywords=[])
        return self._replace(node, call)

    def visit_Call(self, node: ast.Call):
        reduction = self._masked_reduction(node)
        if reduction is not None:
            return reduction
        self.generic_visit(node)
        if self.print_is_builtin and isinstance(node.func, ast.Name) and node.func.id == "print":
            node.func = self._replace(node.func, ast.Name(id=_PRINT, ctx=ast.Load()))
            return node
        if (
            self._is_numpy_call(node.func, {"array"})
            and len(node.args) == 1
            and isinstance(node.args[0], (ast.List, ast.Tuple))
            and node.args[0].elts
            and all(not isinstance(e, (ast.List, ast.Tuple, ast.Starred)) for e in node.args[0].elts)
            and not all(isinstance(e, ast.Constant) for e in node.args[0].elts)
            and all(k.arg == "dtype" for k in node.keywords)
        ):
            call = ast.Call(func=ast.Name(id=_ARRAY_OF, ctx=ast.Load()), args=node.args[0].elts, keywords=node.keywords)
            return self._replace(node, call)
        return node

    def _masked_reduction(self, node: ast.Call) -> ast.expr | None:
        """``x[m].sum()`` / ``np.sum(x[m])`` (and max, min, mean) with no other argument, else ``None``."""
        if node.keywords:
            return None
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _REDUCTIONS and not node.args:
            name, selection = func.attr, func.value
        elif self._is_numpy_call(func, _REDUCTIONS) and len(node.args) == 1:
            name, selection = func.attr, node.args[0]
        else:
            return None
        if not (isinstance(selection, ast.Subscript) and _is_mask(selection.slice, self.numpy_names)):
            return None
        array = self.visit(selection.value)
        mask = ast.Call(
            func=ast.Name(id=_MASK_OF, ctx=ast.Load()), args=[self.visit(selection.slice), array], keywords=[]
        )
        name = {"amax": "max", "amin": "min"}.get(name, name)
        fill = _REDUCTIONS[name]
        if fill is None:  # the other extreme of the array: neutral for the selection, and of its type
            fill_node = ast.Call(func=self._np("min" if name == "max" else "max"), args=[array], keywords=[])
        else:
            fill_node = ast.Constant(int(fill))
        where = ast.Call(func=self._np("where"), args=[mask, array, fill_node], keywords=[])
        reduced = ast.Call(func=self._np("sum" if name == "mean" else name), args=[where], keywords=[])
        if name == "mean":
            like = ast.Call(func=self._np("ones_like"), args=[array], keywords=[])
            ones = ast.Call(func=self._np("where"), args=[mask, like, ast.Constant(0)], keywords=[])
            count = ast.Call(func=self._np("sum"), args=[ones], keywords=[])
            reduced = ast.BinOp(left=reduced, op=ast.Div(), right=count)
        return self._replace(node, reduced)


class _SameMask(ast.NodeTransformer):
    """Replaces ``Y[m]`` by ``Y`` for the one mask ``m`` (compared as its AST dump)."""

    def __init__(self, forms: _Forms, mask: str):
        self.forms, self.mask = forms, mask

    def visit_Subscript(self, node: ast.Subscript):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and ast.dump(node.slice) == self.mask:
            return self.forms._replace(node, node.value)
        return node


def _is_mask(index: ast.expr, numpy_names: set[str]) -> bool:
    """Whether an index is boolean by its form: a comparison, ``~``/``&``/``|``/``^`` of such, or NumPy's logical
    functions (a name alone could be an integer: it is left to DaCe)."""
    if isinstance(index, ast.Compare):
        return True
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.Invert):
        return _is_mask(index.operand, numpy_names)
    if isinstance(index, ast.BinOp) and isinstance(index.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _is_mask(index.left, numpy_names) or _is_mask(index.right, numpy_names)
    if isinstance(index, ast.Call) and isinstance(index.func, ast.Attribute):
        base = index.func.value
        return index.func.attr in _MASK_CALLS and isinstance(base, ast.Name) and base.id in numpy_names
    return False


def _flipped(node: ast.Subscript) -> tuple[ast.expr, list[int]] | None:
    """``x[i:j:-1]`` as ``(x[j + 1:i + 1], axes)``: the same elements with step 1 and the result's axes to flip, or
    ``None`` where no slice has step -1 (other negative steps are left to DaCe, which refuses them)."""
    dims = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if any(isinstance(d, ast.Constant) and d.value in (None, Ellipsis) for d in dims):
        return None
    new_dims, axes, axis = [], [], 0
    for d in dims:
        if not isinstance(d, ast.Slice):
            new_dims.append(d)
            continue
        if _constant(d.step) == -1:
            bounds = _ascending(d)
            if bounds is None:
                return None
            new_dims.append(ast.Slice(lower=bounds[0], upper=bounds[1], step=None))
            axes.append(axis)
        else:
            new_dims.append(d)
        axis += 1
    if not axes:
        return None
    if all(isinstance(d, ast.Slice) and d.lower is d.upper is d.step is None for d in new_dims):
        return node.value, axes  # every element of every axis: the array itself, not a view of it
    index = ast.Tuple(new_dims, ast.Load()) if isinstance(node.slice, ast.Tuple) else new_dims[0]
    return ast.Subscript(value=node.value, slice=index, ctx=ast.Load()), axes


def _constant(expr: ast.expr | None) -> int | None:
    """The integer value of a literal (``-1`` is a unary minus of a constant in the AST), else ``None``."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub) and isinstance(expr.operand, ast.Constant):
        value = expr.operand.value
        return -value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    return None


def _ascending(d: ast.Slice) -> tuple[ast.expr | None, ast.expr | None] | None:
    """The bounds of the step-1 slice over the elements of ``d`` (step -1): ``i:j:-1`` reads ``i`` down to ``j + 1``,
    so ``j + 1:i + 1``; ``None`` where the literal bounds make that slice differ (``j == -1`` selects nothing)."""
    start, stop = _constant(d.lower), _constant(d.upper)
    if d.upper is None:
        lower = None
    elif stop is not None:
        if stop == -1:
            return None
        lower = ast.Constant(stop + 1) if stop + 1 >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-(stop + 1)))
    else:
        lower = ast.BinOp(left=d.upper, op=ast.Add(), right=ast.Constant(1))
    if d.lower is None or start == -1:
        upper = None
    elif start is not None:
        upper = ast.Constant(start + 1) if start + 1 >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-(start + 1)))
    else:
        upper = ast.BinOp(left=d.lower, op=ast.Add(), right=ast.Constant(1))
    return lower, upper


def _edits(tree: ast.AST) -> list[tuple[int, int, int, int, str, str]]:
    """``(line, col, end line, end col, text, closing)`` of every outermost rewritten node (lines 1-based in the parsed
    text, columns in UTF-8 bytes as :mod:`ast` counts them): the line breaks of its span go between the text and the
    closing parenthesis."""
    found: list[tuple[int, int, int, int, str, str]] = []

    def walk(node: ast.AST) -> None:
        span = getattr(node, "_cpufree_span", None)
        if isinstance(node, ast.Assign) and span is not None:  # a statement: its value holds the line breaks
            found.append((*span, f"{ast.unparse(node.targets[0])} = ({ast.unparse(node.value)}", ")"))
            return
        if span is not None:
            found.append((*span, f"({ast.unparse(node)}", ")"))
            return
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(tree)
    return found


def _edited(lines: list[str], edits, indent: int) -> list[str]:
    """``lines`` with each edit's span replaced by its text; a span over several lines keeps them (its line breaks
    go inside the text's closing parenthesis), so every other line stays at its number."""
    out = list(lines)
    for line, col, end_line, end_col, text, closing in sorted(edits, reverse=True):
        first, last = line - 1, end_line - 1
        joined = "".join(out[first : last + 1]).encode()
        start = indent + col
        end = len("".join(out[first:last]).encode()) + indent + end_col
        new = text + "\n" * (last - first) + closing
        out[first : last + 1] = (joined[:start] + new.encode() + joined[end:]).decode().splitlines(keepends=True)
    return out


@contextlib.contextmanager
def everyday_forms(program):
    """Yields the program for DaCe to parse: ``program`` itself where neither its source nor that of a program it
    calls has a form of the module docstring, else a copy whose source (and the called programs' sources), as
    :func:`inspect.getsource` reads them while the ``with`` block runs, has them rewritten; the copy's globals name
    what the rewritten text calls, and copies of the called programs in place of the originals.

    :raises NotPersistableError: for a boolean selection whose length depends on the data.
    """
    files: dict[str, tuple[os.stat_result, list[str]]] = {}
    parsed = _rewritten(program, files, depth=0)
    saved = {name: linecache.cache.get(name) for name in files}
    for name, (stat, lines) in files.items():
        linecache.cache[name] = (stat.st_size, stat.st_mtime, lines, name)
    try:
        yield parsed
    finally:
        for name, entry in saved.items():
            if entry is None:
                linecache.cache.pop(name, None)
            else:
                linecache.cache[name] = entry


#: how deep calls of programs are followed
_MAX_DEPTH = 8


def _rewritten(program, files: dict, depth: int):
    """``program``, or a copy of it whose source in ``files`` (file name -> its stat and its lines with the edits
    made so far) has the forms rewritten and whose called programs are such copies."""
    try:
        lines, first = inspect.getsourcelines(program.f)
        filename = inspect.getsourcefile(program.f)
        stat = os.stat(filename)
    except (OSError, TypeError):
        return program
    indent = len(lines[0].encode()) - len(lines[0].lstrip().encode())
    numpy_names = {k for k, v in program.global_vars.items() if v is np}
    forms = _Forms(numpy_names, filename, first, "print" not in program.global_vars)
    tree = forms.visit(ast.parse(textwrap.dedent("".join(lines))))
    called = {}
    if depth < _MAX_DEPTH:
        for node in ast.walk(tree):
            value = program.global_vars.get(node.func.id) if _calls_a_name(node) else None
            if isinstance(value, DaceProgram) and value is not program:
                copied = _rewritten(value, files, depth + 1)
                if copied is not value:
                    called[node.func.id] = copied
    if not forms.changed and not called:
        return program
    if forms.changed:
        whole = files[filename][1] if filename in files else linecache.getlines(filename)
        whole = whole[: first - 1] + _edited(lines, _edits(tree), indent) + whole[first - 1 + len(lines) :]
        files[filename] = (stat, whole)
    parsed = copy.copy(program)
    parsed.global_vars = {**program.global_vars, **_CALLS, **called}
    parsed._cache = cached_program.DaceProgramCache(parsed._eval_closure)
    return parsed


def _calls_a_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
