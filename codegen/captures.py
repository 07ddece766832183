"""The kernel's pointers, passed to the functions a step runs in as parameters instead of captures.

A tile step (``auto __step = [=](auto __tile) {...}``, run by ``cpufree::run_step``) and a step apart
(``cpufree::apart([=]() {...})``) are functions of their own. Captured by value, the kernel's pointers
are members of the lambda's object there: nvcc no longer knows that they address global memory nor
which of them are ``__restrict__``, and prints generic loads and stores that it cannot reorder (PTX of
gesummv's row step: 96 generic ``ld.f64``, no ``ld.global``). As parameters declared like the kernel's,
the step's code compiles as it does inlined in the kernel. Only the pointers a step names are passed.

Element reads of arrays the kernel never writes (its ``__restrict__`` pointers) load through ``__ldg``
inside these functions: nvcc proves that read-only property for the kernel, not for a function it calls,
and gesummv's fused rows at 11200^2 on an H200 ran 2.11 ms with plain loads, 1.53 ms with ``__ldg``
(plain grid-stride loops: 1.67 ms); mvt went 1.32 -> 1.38 ms (plain: 3.98).
"""

from __future__ import annotations

import re

from .loops import indent

STEP_OPEN, STEP_CLOSE = "auto __step = [=](auto __tile) {", "};"
APART_OPEN, APART_CLOSE = "cpufree::apart([=]() {", "});"


def apart(code: list[str]) -> list[str]:
    """``code`` in a function of its own (``cpufree::apart``); :func:`pass_pointers` adds its parameters."""
    return [APART_OPEN] + indent(code) + [APART_CLOSE]


def step(body: list[str]) -> list[str]:
    """``body`` as a tile step (``__step``, run by ``cpufree::with_tile``); :func:`pass_pointers` adds its
    parameters."""
    return [STEP_OPEN] + indent(body) + [STEP_CLOSE]


# Element types that __ldg loads (CUDA and HIP overloads).
LDG_TYPES = {
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


def _read_only_loads(line: str, read_only: set[str]) -> str:
    """``const T v = A[...];`` as ``const T v = __ldg(&A[...]);`` when ``A`` is read-only."""
    m = re.fullmatch(r"(\s*const [\w ]+? \w+ = )(\w+)(\[.*\]);", line)
    return f"{m.group(1)}__ldg(&{m.group(2)}{m.group(3)});" if m and m.group(2) in read_only else line


def _uses(body: str, pointers: dict[str, str]) -> list[str]:
    return [n for n in pointers if re.search(rf"(?<![\w.>]){re.escape(n)}\b", body)]


def pass_pointers(lines: list[str], pointers: dict[str, str]) -> list[str]:
    """``lines`` with every step lambda taking the ``pointers`` (name -> declaration) its body names.

    A lambda opens on a line of its own and closes at the same indentation; a tile step is followed by
    its ``cpufree::with_tile<...>(want, __step);`` call, which then passes the pointers after ``__step``.
    """
    out = list(lines)
    read_only = {n for n, d in pointers.items() if "__restrict__" in d and d.split("*")[0].strip() in LDG_TYPES}
    for i, line in enumerate(out):
        opened = line.strip()
        if opened not in (STEP_OPEN, APART_OPEN):
            continue
        pad = line[: len(line) - len(line.lstrip())]
        close = pad + (STEP_CLOSE if opened == STEP_OPEN else APART_CLOSE)
        end = next(k for k in range(i + 1, len(out)) if out[k] == close)
        used = _uses("\n".join(out[i + 1 : end]), pointers)
        if not used:
            continue
        out[i + 1 : end] = [_read_only_loads(line, read_only) for line in out[i + 1 : end]]
        decls, names = ", ".join(pointers[n] for n in used), ", ".join(used)
        if opened == STEP_OPEN:
            call = out[end + 1]
            if not (call.startswith(pad + "cpufree::with_tile<") and call.endswith(", __step);")):
                raise AssertionError(f"a tile step without its with_tile call: {call.strip()}")
            out[i] = f"{pad}auto __step = [=](auto __tile, {decls}) {{"
            out[end + 1] = call[: -len(");")] + f", {names});"
        else:
            out[i] = f"{pad}cpufree::apart([=]({decls}) {{"
            out[end] = f"{pad}}}, {names});"
    return out
