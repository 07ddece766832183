"""What the lowering of one SDFG to one kernel needs to know about its data and symbols."""

from __future__ import annotations

from dataclasses import dataclass, field

import dace
from dace import data as dt
from dace.sdfg import nodes

from dace_cpufree.errors import NotPersistableError

from .expressions import flat_offset, kernel_symbols, subset_offset  # noqa: F401


@dataclass
class KernelArg:
    """One parameter of the kernel and of its host launcher."""

    name: str
    ctype: str  # the element type
    kind: str  # "array" (device pointer), "scalar" (by value), "symbol" or "workspace"
    desc: dace.data.Data | None = None
    written: bool = True

    @property
    def decl(self) -> str:
        # __restrict__ only on arrays the kernel never writes. On a written array it lets nvcc keep a
        # value in a register across grid.sync() although another thread changed it (seen on an H200:
        # a while loop whose counter one thread increments never ended for the others).
        if self.kind in ("array", "workspace"):
            return f"{self.ctype} *{'' if self.written else ' __restrict__'} {self.name}"
        return f"{self.ctype} {self.name}"


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

    def __post_init__(self):
        self._classify()

    @property
    def device(self) -> set[str]:
        """Containers in device memory, i.e. shared between threads."""
        return {a.name for a in self.args if a.kind in ("array", "workspace")}

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"__{prefix}{self.counter}"

    def access(self, name: str, subset) -> str:
        """C++ lvalue of the first element of ``name[subset]``."""
        desc = self.sdfg.arrays[name]
        if isinstance(desc, dt.Scalar) and name not in self.device and name not in self.local:
            return name
        return f"{name}[{subset_offset(desc, subset)}]"

    def element(self, name: str, index: list) -> str:
        return f"{name}[{flat_offset(self.sdfg.arrays[name], index)}]"

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
            if isinstance(desc, (dt.View, dt.Reference, dt.Stream)):
                raise NotPersistableError(
                    f"container '{name}' is a {type(desc).__name__}, which persistent kernels do not support yet."
                )
            if name in scoped and name not in unscoped:
                self.local.add(name)
            else:
                self.args.append(KernelArg(name, desc.dtype.ctype, "workspace", desc))


def symbol_ctype(sdfg: dace.SDFG, name: str) -> str:
    """Integer symbols are 64-bit in the kernel, whatever their declared width: they index memory."""
    dtype = sdfg.symbols.get(name, dace.int64)
    return "long long" if dtype in (dace.int8, dace.int16, dace.int32, dace.int64, dace.uint32) else dtype.ctype


def _written_containers(sdfg: dace.SDFG) -> set[str]:
    written = set()
    for state in sdfg.states():
        for node in state.data_nodes():
            if state.in_degree(node) > 0:
                written.add(node.data)
    return written


def is_scope_local(ctx: KernelContext, node: nodes.Node) -> bool:
    return isinstance(node, nodes.AccessNode) and node.data in ctx.local
