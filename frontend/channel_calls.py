"""``dace_cpufree.progress(done, total)`` and ``dace_cpufree.notify(tag, value)`` inside a ``@dace.program``.

Each call becomes a C++ tasklet run by the leader thread (the default placement of a tasklet outside a map) that
writes to the device <-> host channel (``cpufree/channel.cuh``): two volatile stores for progress, one ring record
for a notification. The tasklet (a :class:`~dace_cpufree.facts.CpufreeTasklet`) states its ``channel`` use
(``"progress"`` or ``"notify"``; ``notify_tag``: the name of a string tag), so the compiler builds the channel for
programs that use it without reading any code text (:func:`dace_cpufree.codegen.channel.program_channel`). It has
side effects (``ordered``) and no outputs, so DaCe's dead-code passes keep it, and it orders nothing: the kernel
never waits for it.

``print(...)`` in a compiled program becomes a host callback (:func:`print_callback`; :mod:`.callbacks` rewrites it
into a call through the channel). DaCe's own callback of ``print`` fails on a symbol argument (``print(t)`` of a loop
variable: ``TypeError: argument of type 'symbol' is not iterable``, upstream DaCe alike), so this replacement makes
the callback tasklet DaCe makes, with a symbolic argument written as its expression. It is registered as
:func:`print_of`, which :mod:`.source_forms` puts in place of ``print`` in the programs compiled here: DaCe's
``print`` is left as it is for everyone else (and for programs those call).

Registered with DaCe's operator repository under the names a program can call them by.
"""

from __future__ import annotations

import builtins
import hashlib
from dataclasses import dataclass
from numbers import Number

import dace
import sympy
from dace import data as dt
from dace.frontend.common import op_repository as oprepo
from dace.frontend.python.common import StringLiteral
from dace.memlet import Memlet
from dace.sdfg import nodes
from dace.sdfg.type_inference import infer_expr_type

from dace_cpufree.channel_marks import tag_number
from dace_cpufree.cpp import cexpr
from dace_cpufree.errors import CpufreeError
from dace_cpufree.facts import CpufreeTasklet

from .arguments import call_site, scalar_in_memory

PROGRESS_NAMES = ("dace_cpufree.progress", "dace_cpufree.channel.progress")
NOTIFY_NAMES = ("dace_cpufree.notify", "dace_cpufree.channel.notify")


def _value(sdfg: dace.SDFG, value, call: str, role: str) -> tuple[str | None, str | None]:
    """``(C++ expression, None)`` for a constant or symbolic value, ``(None, container)`` for a scalar in memory."""
    if isinstance(value, bool):
        raise CpufreeError(f"{call}: '{role}' must be a number, got a bool.")
    if isinstance(value, (int, float)):
        return repr(value), None
    container = scalar_in_memory(sdfg, value, call, role, CpufreeError)
    if container is not None:
        return None, container
    if isinstance(value, str) and value in sdfg.symbols:
        return value, None
    if dace.symbolic.issymbolic(value) or isinstance(value, dace.symbolic.SymExpr):
        return cexpr(value), None
    raise CpufreeError(f"{call}: '{role}' must be a number, a symbol or a scalar, got {value!r}.")


def _tasklet(pv, sdfg, state, label: str, kind: str, values: dict, code: str, tag: str | None = None) -> None:
    """A leader tasklet running ``code`` (``{role}`` stands for each value's C++ text)."""
    call = call_site(pv, kind)
    texts, reads = {}, {}
    for role, value in values.items():
        expr, data = _value(sdfg, value, call, role)
        if data is None:
            texts[role] = f"({expr})"
        else:
            texts[role] = f"_{role}"
            reads[f"_{role}"] = data
    inputs = {conn: sdfg.arrays[data].dtype for conn, data in reads.items()}
    # ordered: an effect outside the dataflow (the host sees it), so DaCe's dead-code passes keep it although it
    # has no outputs
    node = CpufreeTasklet(label, inputs, {}, code.format(**texts), channel=kind, notify_tag=tag, ordered=True)
    state.add_node(node)
    for conn, data in reads.items():
        state.add_edge(state.add_read(data), None, node, conn, Memlet(data=data, subset="0"))


def _progress(pv, sdfg: dace.SDFG, state: dace.SDFGState, done, total):
    code = "cpufree::channel::progress((long long){done}, (long long){total});"
    _tasklet(pv, sdfg, state, "progress", "progress", {"done": done, "total": total}, code)
    return []


def _notify(pv, sdfg: dace.SDFG, state: dace.SDFGState, tag, value):
    if isinstance(tag, StringLiteral):  # how DaCe's frontend hands a string constant
        tag = str(tag.value)
    if isinstance(tag, str) and tag not in sdfg.arrays and tag not in sdfg.symbols:
        name, number = tag, tag_number(tag)
    elif isinstance(tag, int) and not isinstance(tag, bool):
        name, number = None, tag
    else:
        raise CpufreeError(
            f"notify: the tag must be a string or an integer constant, got {tag!r}. Fix: notify('residual', r[0])."
        )
    code = f"cpufree::channel::notify({number}LL, (double){{value}});"
    _tasklet(pv, sdfg, state, "notify", "notify", {"value": value}, code, tag=name)
    return []


for _name in PROGRESS_NAMES:
    oprepo.replaces(_name)(_progress)
for _name in NOTIFY_NAMES:
    oprepo.replaces(_name)(_notify)


#: keywords of ``print`` a program may pass (as constants)
PRINT_KEYWORDS = ("sep", "end", "flush")

#: every ``print`` callback with constants made so far, by its name (a name says its constants: one name, one
#: callable). DaCe takes the callbacks of a called ``@dace.program`` into the caller's closure only where its
#: preprocessing found them, which it does not for a replaced function; the host finds them here.
PRINT_CALLBACKS: dict[str, PrintWith] = {}


@dataclass(frozen=True)
class PrintWith:
    """``print`` with a call's constant arguments and keywords put back: the kernel passes only the values (DaCe's
    callbacks alike). Equal calls compare equal, so they share one callback.

    :ivar constants: ``(position, value)`` of each constant argument; :ivar count: the number of arguments.
    :ivar keywords: ``(name, value)`` of each keyword.
    """

    constants: tuple
    count: int
    keywords: tuple = ()

    def __call__(self, *values):
        fixed, given = dict(self.constants), iter(values)
        builtins.print(*(fixed[k] if k in fixed else next(given) for k in range(self.count)), **dict(self.keywords))


def _constant(value) -> tuple[bool, object]:
    """``(True, value)`` for a constant argument of ``print`` (a string, number, bool or None), else ``(False, _)``."""
    if isinstance(value, StringLiteral):  # how DaCe's frontend hands a string constant
        return True, str(value.value)
    return isinstance(value, (Number, type(None))) and not isinstance(value, sympy.Basic), value


def print_callback(pv, sdfg: dace.SDFG, state: dace.SDFGState, *args, **kwargs):
    """``print(...)`` in a program: the callback tasklet DaCe's ``create_callback`` makes (``print(__in_x, t)``,
    the ``__pystate`` chain, a ``dace.callback`` symbol, the callable in the program's closure), except that a
    symbol or symbolic expression is passed as its expression, where DaCe's frontend raises a TypeError."""
    where = f"{pv.filename}:{pv.current_lineinfo.start_line}" if pv.current_lineinfo else pv.filename
    keywords = {}
    for key, value in kwargs.items():
        constant, value = _constant(value)
        if key not in PRINT_KEYWORDS or not constant:
            raise CpufreeError(f"print(...) at {where} passes {key}={value!r}. Fix: pass constant sep, end, flush.")
        keywords[key] = value
    constants, texts, argtypes, reads, writes = [], [], [], [], []
    for k, value in enumerate(args):
        if isinstance(value, list) and len(value) == 1:  # DaCe's frontend hands t % 2 as [Mod(t, 2)]
            value = value[0]
        constant, value = _constant(value)
        desc = sdfg.arrays.get(value) if isinstance(value, str) else None
        if constant:
            constants.append((k, value))
        elif isinstance(desc, dt.Scalar):
            reads.append(value)
            texts.append(f"__in_{value}")
        elif isinstance(desc, dt.Array):  # DaCe passes arrays as outputs (host_callbacks refuses them)
            writes.append(value)
            texts.append(f"__out_{value}")
        elif isinstance(value, sympy.Basic) or (isinstance(value, str) and value in sdfg.symbols):
            dtype = infer_expr_type(value, sdfg.symbols) or dace.int64  # evaluated by the kernel, or by DaCe's code
            texts.append(f"({value})")
            desc = dt.Scalar(dtype)
        else:
            raise CpufreeError(f"print(...) at {where} passes {value!r}. Fix: pass numbers, strings or scalars.")
        if desc is not None:
            argtypes.append(desc)
    func = PrintWith(tuple(constants), len(args), tuple(keywords.items()))
    if not constants and not keywords:
        func = builtins.print  # DaCe's callback of a plain print is print itself
    name = _closure_name(pv.closure.callbacks, func)
    symbol = _callback_symbol(sdfg, name, dace.callback(None, *argtypes))
    line = pv.current_lineinfo.start_line if pv.current_lineinfo else 0
    tasklet = state.add_tasklet(
        f"callback_{line}",
        {f"__in_{n}": None for n in dict.fromkeys(reads)},
        {f"__out_{n}": None for n in dict.fromkeys(writes)},
        f"{symbol}({', '.join(texts)})",
        side_effects=True,
    )
    for n in dict.fromkeys(reads):
        state.add_edge(state.add_read(n), None, tasklet, f"__in_{n}", dace.Memlet(n))
    for n in dict.fromkeys(writes):
        state.add_edge(tasklet, f"__out_{n}", state.add_write(n), None, dace.Memlet(n))
    _connect_pystate(sdfg, state, tasklet)
    return []


def _closure_name(callbacks: dict, func) -> str:
    """The name of ``func`` (``print`` itself, or ``print_<digest of its constants>``), added to the program's
    callbacks and to :data:`PRINT_CALLBACKS`."""
    name = "print"
    if func is not builtins.print:
        name = f"print_{hashlib.sha1(repr(func).encode()).hexdigest()[:12]}"
        PRINT_CALLBACKS[name] = func
    callbacks[name] = ("print", func, False)
    return name


def _callback_symbol(sdfg: dace.SDFG, name: str, ctype: dace.callback) -> str:
    """The callback's symbol in ``sdfg`` (a new one, mapped to ``name``, where ``name`` has another signature)."""
    if name not in sdfg.symbols:
        sdfg.add_symbol(name, ctype)
        return name
    if sdfg.symbols[name] == ctype:
        return name
    symbol = sdfg.find_new_symbol(name)
    sdfg.add_symbol(symbol, ctype)
    sdfg.callback_mapping[symbol] = name
    return symbol


def _connect_pystate(sdfg: dace.SDFG, state: dace.SDFGState, tasklet: nodes.Tasklet) -> None:
    """The ``__pystate`` chain that keeps DaCe's callbacks in program order (as DaCe's frontend connects it)."""
    if "__pystate" not in sdfg.arrays:
        sdfg.add_scalar("__pystate", dace.int32, transient=True)
    tasklet.add_in_connector("__istate", dace.int32, force=True)
    state.add_edge(state.add_read("__pystate"), None, tasklet, "__istate", dace.Memlet("__pystate"))
    tasklet.add_out_connector("__ostate", dace.int32, force=True)
    state.add_edge(tasklet, "__ostate", state.add_write("__pystate"), None, dace.Memlet("__pystate"))


def print_of(*args, **kwargs):
    """``print`` as the programs that dace-cpufree compiles call it: :mod:`.source_forms` reads their ``print`` as
    this function, so the replacement applies to them alone and DaCe's own ``print`` stays as it is elsewhere."""
    builtins.print(*args, **kwargs)


oprepo.replaces(f"{__name__}.print_of")(print_callback)
