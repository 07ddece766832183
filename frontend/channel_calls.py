"""``dace_cpufree.progress(done, total)`` and ``dace_cpufree.notify(tag, value)`` inside a ``@dace.program``.

Each call becomes a C++ tasklet run by the leader thread (the default placement of a tasklet outside a map) that
writes to the device <-> host channel (``cpufree/channel.cuh``): two volatile stores for progress, one ring record
for a notification. The tasklet is marked in its ``location`` (``cpufree_channel``: ``"progress"`` or
``"notify"``; ``cpufree_notify_tag``: the name of a string tag), so the compiler builds the channel for programs
that use it without reading any code text (:func:`dace_cpufree.codegen.channel.program_channel`). It has side
effects and no outputs, so DaCe's dead-code passes keep it, and it orders nothing: the kernel never waits for it.

Registered with DaCe's operator repository under the names a program can call them by.
"""

from __future__ import annotations

import dace
from dace.frontend.common import op_repository as oprepo
from dace.frontend.python.common import StringLiteral
from dace.memlet import Memlet
from dace.properties import make_properties
from dace.sdfg import nodes
from dace_cpufree.codegen.channel import tag_number
from dace_cpufree.codegen.expressions import cexpr

from dace_cpufree.errors import CpufreeError

from .arguments import call_site, scalar_in_memory

PROGRESS_NAMES = ("dace_cpufree.progress", "dace_cpufree.channel.progress")
NOTIFY_NAMES = ("dace_cpufree.notify", "dace_cpufree.channel.notify")


@make_properties
class ChannelTasklet(nodes.Tasklet):
    """A tasklet that writes to the channel: it has an effect outside the dataflow (the host sees it), so DaCe's
    dead-code passes keep it although it has no outputs. Its ``side_effects`` property stays unset: that one marks
    host callbacks, which a persistent kernel refuses."""

    def has_side_effects(self, sdfg) -> bool:
        return True


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
    location = {"cpufree_channel": kind}
    if tag is not None:
        location["cpufree_notify_tag"] = tag
    inputs = {conn: sdfg.arrays[data].dtype for conn, data in reads.items()}
    node = ChannelTasklet(label, inputs, {}, code.format(**texts), language=dace.Language.CPP, location=location)
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
