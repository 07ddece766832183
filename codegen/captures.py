"""The kernel's pointers, passed to the functions a step runs in as parameters instead of captures.

A tile step (``auto __step = [=](auto __tile) {...}``, run by ``cpufree::run_step``) and a step apart
(``cpufree::apart([=]() {...})``) are functions of their own. Captured by value, the kernel's pointers
are members of the lambda's object there: nvcc no longer knows that they address global memory nor
which of them are ``__restrict__``, and prints generic loads and stores that it cannot reorder (PTX of
gesummv's row step: 96 generic ``ld.f64``, no ``ld.global``). As parameters declared like the kernel's,
the step's code compiles as it does inlined in the kernel. Only the pointers a step's code is built from are
passed: the containers of the kernel IR item(s) it runs (:func:`pointers`), decided where the step is made.

Element reads of arrays the kernel never writes (its ``__restrict__`` pointers, ``KernelArg.restrict``) load
through ``__ldg`` inside these functions: nvcc proves that read-only property for the kernel, not for a
function it calls, and gesummv's fused rows at 11200^2 on an H200 ran 2.11 ms with plain loads, 1.53 ms with
``__ldg`` (plain grid-stride loops: 1.67 ms); mvt went 1.32 -> 1.38 ms (plain: 3.98). The reads are the ones the
printer recorded as it declared them (``KernelContext.read``, ``KernelContext.loads``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dace_cpufree.cpp import indent

from . import ir


@dataclass(frozen=True)
class Pointers:
    """The kernel's pointers that one step function takes as parameters, in the kernel's order."""

    decls: tuple[str, ...] = ()  # declared as in the kernel
    names: tuple[str, ...] = ()
    #: the element reads of read-only pointers printed in the kernel (``KernelContext.loads``)
    reads: dict = field(default_factory=dict, compare=False)

    def loads(self, lines: list[str]) -> list[str]:
        """``lines`` with the element reads of these pointers among them (as the printer declared them, indented)
        through ``__ldg``."""
        if not self.names or not self.reads:
            return lines
        out = []
        for line in lines:
            body = line.lstrip(" ")
            read = self.reads.get(body)
            out.append(line[: len(line) - len(body)] + read[1] if read and read[0] in self.names else line)
        return out


def pointers(ctx, names) -> Pointers:
    """The pointers among ``names`` (device containers a step's code is built from) of ``ctx``
    (a ``KernelContext``): its array and workspace arguments, declared as the kernel declares them."""
    args = [a for a in ctx.args if a.pointer and a.name in names]
    return Pointers(tuple(a.kernel_decl(ctx.race_check) for a in args), tuple(a.name for a in args), ctx.loads)


def apart(code: list[str], passed: Pointers) -> list[str]:
    """``code`` in a function of its own (``cpufree::apart``) that takes the ``passed`` pointers."""
    if not passed.names:
        return ["cpufree::apart([=]() {"] + indent(code) + ["});"]
    opened = f"cpufree::apart([=]({', '.join(passed.decls)}) {{"
    return [opened] + indent(passed.loads(code)) + [f"}}, {', '.join(passed.names)});"]


def step(body: list[str], passed: Pointers, runner: str) -> list[str]:
    """``body`` as a tile step (``__step``) taking the ``passed`` pointers, run by the call ``runner`` whose
    arguments end with the step (``cpufree::with_tile<...>(want, __step``)."""
    params = ", ".join(("auto __tile",) + passed.decls)
    call = ", ".join((runner,) + passed.names)
    return [f"auto __step = [=]({params}) {{"] + indent(passed.loads(body)) + ["};", f"{call});"]


def step_apart(item: ir.Item, ctx) -> list[str]:
    """A grid step in a function of its own (``cpufree::apart``) taking the pointers of the containers it
    reads, writes or addresses remotely; see ``printer.Printer`` for where."""
    if item.executor != ir.Executor.GRID or item.tile:
        return item.code  # tile steps are functions of their own anyway (cpufree::run_step)
    return apart(item.code, pointers(ctx, item.reads | item.writes | item.remote))
