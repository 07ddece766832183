"""DaCe's frontend failures as :class:`NotPersistableError`: the user's file, line and statement, what DaCe said, and
a fix.

DaCe 2.0.0b1 refuses some constructs with a ``DaceSyntaxError`` and fails inside its own code on others (a
``KeyError`` from a type table, a ``TypeError`` from a symbol, ...). Either way a user should read which line of their
program it was and what to write instead, not a traceback into DaCe: the line is the one DaCe's program visitor was
parsing when it failed (``ProgramVisitor.current_lineinfo``, found on the traceback's frames), or the node a
``DaceSyntaxError`` names.
"""

from __future__ import annotations

import contextlib
import importlib.util
import linecache
import os

from dace.frontend.python.common import DaceSyntaxError
from dace.sdfg.validation import InvalidSDFGEdgeError, InvalidSDFGNodeError

from dace_cpufree.errors import CpufreeError, NotPersistableError

#: DaCe's words for a construct it refuses, and the fix that works here
_FIXES = (
    (
        "Negative strides",
        "reverse with step -1 first, then take a positive step (`r = x[::-1]` then `r[::2]`), or write the copy as a "
        "dace.map; inside a nested program called by the compiled one, step -1 too needs that form",
    ),
    ("Boolean array indexing", "reduce the selection where it is (x[x > 0].sum()) or use np.where(mask, x, 0)"),
    ("Cannot obtain source code", "place the program in a file and import it"),
    (
        "KeyError: '__sym_",
        "DaCe names a slice bound computed from scalar arguments (`V[n // 2 - k : n // 2 + k]`) with a symbol that a "
        "later dace.map or nested scope cannot see; declare those arguments as size symbols (`n = dace.symbol('n')` "
        "at module level, dropped from the parameters) or move the slice after the map",
    ),
)
_GENERAL_FIX = (
    "write the statement with the NumPy forms of the README's supported list (one operation per statement, or a "
    "dace.map loop), or compute it before calling the program"
)


#: where DaCe and dace-cpufree live: a node made there carries no line of the user's
_LIBRARIES = tuple(
    os.path.dirname(os.path.abspath(importlib.util.find_spec(name).origin))
    for name in (
        "dace",
        "dace_cpufree",
        "dace_cpufree.frontend",
        "dace_cpufree.transformations",
        "dace_cpufree.codegen",
    )
)


def _visitor_line(tb) -> tuple[str, int] | None:
    """``(file, line)`` the innermost DaCe program visitor on the traceback was parsing, else ``None``."""
    found = None
    while tb is not None:
        visitor = tb.tb_frame.f_locals.get("self")
        info = getattr(visitor, "current_lineinfo", None)
        if info is not None and getattr(info, "start_line", 0) and getattr(info, "filename", None):
            found = (info.filename, info.start_line)
        tb = tb.tb_next
    return found


def _syntax_line(error: DaceSyntaxError) -> tuple[str, int] | None:
    line = getattr(error.node, "lineno", 0)
    visitor = error.visitor
    if not line or visitor is None:
        return None
    return getattr(visitor, "filename", "<program>"), line


def _validation_line(error) -> tuple[str, int] | None:
    """``(file, line)`` of the node or edge a DaCe validation error names, from its debug information."""
    try:
        state = error.sdfg.node(error.state_id)
        if isinstance(error, InvalidSDFGNodeError):
            info = state.node(error.node_id).debuginfo
        else:
            edge = state.edges()[error.edge_id]
            info = getattr(edge.data, "debuginfo", None) or edge.src.debuginfo or edge.dst.debuginfo
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return None
    if info is None or not info.filename or info.start_line <= 0:
        return None
    if os.path.abspath(info.filename).startswith(_LIBRARIES):  # DaCe's default: the line that made the node
        return None
    return info.filename, info.start_line


def _fix(text: str) -> str:
    return next((fix for words, fix in _FIXES if words in text), _GENERAL_FIX)


def _reported(error: Exception) -> tuple[str, tuple[str, int] | None]:
    """What DaCe said (its first line) and ``(file, line)`` of the user's statement it concerns, where known."""
    if isinstance(error, DaceSyntaxError):
        said, where = error.message, _syntax_line(error) or _visitor_line(error.__traceback__)
    elif isinstance(error, (InvalidSDFGNodeError, InvalidSDFGEdgeError)):
        said = f"{type(error).__name__}: {error.message}"
        where = _validation_line(error) or _visitor_line(error.__traceback__)
    else:
        said, where = f"{type(error).__name__}: {error}", _visitor_line(error.__traceback__)
    return (said.strip().splitlines()[0] if said.strip() else type(error).__name__), where


@contextlib.contextmanager
def frontend_errors(name: str, transforming: bool = False):
    """Turns an exception of DaCe's frontend while parsing program ``name``, of DaCe's simplification and validation
    of what it built, or (``transforming``) of the passes that make it one kernel, into
    :class:`NotPersistableError` naming the statement (errors of dace-cpufree pass unchanged)."""
    try:
        yield
    except CpufreeError:
        raise
    except Exception as error:  # DaCe raises many types; each is reported the same way
        said, where = _reported(error)
        what = f"dace-cpufree could not make '{name}' one kernel" if transforming else f"DaCe cannot parse '{name}'"
        if where is None:
            at = ""
        else:
            file, line = where
            statement = linecache.getline(file, line).strip()
            at = f" at {os.path.basename(file)}:{line} ({file}){f': `{statement}`' if statement else ''}"
        fix = (
            f"{_GENERAL_FIX}; this is a gap of dace-cpufree or DaCe: please report it with the program"
            if transforming
            else _fix(said)
        )
        raise NotPersistableError(f"{what}{at}. DaCe said: {said}. Fix: {fix}.") from error
