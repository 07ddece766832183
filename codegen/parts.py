"""Printing of block parts: the steps of a ``@mapgridscope`` block function or of an automatic scope of independent
steps run on their part's blocks (:class:`~dace_cpufree.facts.BlockPart` on each :class:`~.ir.Item`), the
split of the grid computed at kernel start, and the ``inspect`` text of such steps."""

from __future__ import annotations

import dace

from dace_cpufree.cpp import cexpr
from dace_cpufree.errors import CpufreeError

from . import ir


def in_part(item: ir.Item, code: list[str]) -> tuple[list[str], int]:
    """``code`` run by the blocks of the item's part, which see them as their grid, and the number of part
    barriers printed (the part's barrier comes first where the sync analysis asked for one)."""
    p = item.part
    share = f"__scope{p.scope}"
    if p.automatic:  # the share where the step runs, from the scope's element counts at this point
        share = "__share"
        elems = ", ".join(f"(long long)({cexpr(dace.symbolic.pystr_to_symbolic(e))})" for e in p.scope_elems)
        lines = [
            "{",
            f"const long long __elems[{p.count}] = {{{elems}}};",
            "const cpufree::BlockShare __share = cpufree::auto_share(__elems, __blocks, blockDim.x, __block);",
        ]
        inner = _guarded(item, share, p, code, f"side by side: step {p.index + 1} of {p.count}")
        return lines + inner + ["}"], int(item.part_sync_before)
    return _guarded(item, share, p, code, f"block function {p.name.replace('__', '.', 1)}"), int(item.part_sync_before)


def _guarded(item: ir.Item, share: str, p, code: list[str], what: str) -> list[str]:
    lines = [f"if ({share}.runs({p.index})) {{  // {what}"]
    if item.part_sync_before:
        lines.append(
            f"    cpufree::part_sync(&__cpufree_part_bar{p.scope}[{p.index}], {share}.first, "
            f"{share}.first + {share}.size);"
        )
    return lines + [
        f"    const unsigned int __part_block = __block - {share}.first, __part_blocks = {share}.size;",
        "    {",
        "        const unsigned int __block = __part_block, __blocks = __part_blocks;",
        "        const long long __tid = (long long)__block * blockDim.x + threadIdx.x;",
        "        const long long __nthreads = (long long)__blocks * blockDim.x;",
        *["        " + line if line else line for line in code],
        "    }",
        "}",
    ]


def strategy(item: ir.Item) -> str:
    """How a step runs, for ``dace-cpufree inspect``: with its block function's share of the grid, if any."""
    text = item.strategy or ("leader thread" if item.executor == ir.Executor.LEADER else "grid-stride copy")
    p = item.part
    if p is None:
        return text
    if p.automatic:
        return (
            f"{text}; side by side with {p.count - 1} independent step(s) (part {p.index + 1} of {p.count}: "
            f"{p.elems} of {' + '.join(str(e) for e in p.scope_elems)} elements; on blocks of its own, in that "
            "proportion, when together they have fewer elements than the grid has threads)"
        )
    share = "share inferred from its work" if p.inferred else "share by its range"
    barrier = ", a barrier of its blocks before it" if item.part_sync_before else ""
    name = p.name.replace("__", ".", 1)
    return f"{text}; on the blocks of block function {name} (part {p.index + 1} of {p.count}, {share}{barrier})"


def block_scopes(root) -> list:
    """The block scopes of the kernel (``@mapgridscope``) in scope order, each the list of its functions'
    :class:`~dace_cpufree.facts.BlockPart` in part order."""
    found = {}
    for item in ir.items(root):
        if item.part is not None:
            found.setdefault(item.part.scope, {})[item.part.index] = item.part
    return [[parts[k] for k in sorted(parts)] for _, parts in sorted(found.items())]


def scope_code(scopes: list, known: set, synced: set) -> tuple[list[str], str]:
    """Kernel lines that split the grid's blocks among each scope's block functions at launch
    (``cpufree::split_blocks``), and the globals holding the barriers of their blocks (for an automatic scope, whose
    split is computed where its steps run, only where one of its steps waits at such a barrier: ``synced`` holds
    those scopes)."""
    lines, globals_ = [], ""
    for parts in scopes:
        if parts[0].automatic:
            if parts[0].scope in synced:
                globals_ += f"__device__ cpufree::PartBarrier __cpufree_part_bar{parts[0].scope}[{parts[0].count}];\n"
            continue
        s, k = parts[0].scope, parts[0].count
        if len(parts) != k:
            grid = parts[0].name.split("__")[0]
            raise CpufreeError(f"grid function '{grid}': {k - len(parts)} of its block functions have no step left.")
        elems = []
        for p in parts:
            expr = dace.symbolic.pystr_to_symbolic(p.elems)
            unknown = sorted(str(x) for x in expr.free_symbols if str(x) not in known)
            if unknown:
                raise CpufreeError(
                    f"block function '{p.name.replace('__', '.', 1)}' covers {p.elems} elements, which depends on "
                    f"{', '.join(unknown)}: the blocks are split at launch. Fix: declare its range with the "
                    "program's size symbols (@blocks[lo:hi])."
                )
            elems.append(f"(long long)({cexpr(expr)})")
        inferred = "true" if any(p.inferred for p in parts) else "false"
        lines += [
            f"    cpufree::BlockShare __scope{s};",
            "    {",
            f"        const long long __elems[{k}] = {{{', '.join(elems)}}};",
            f"        unsigned int __lo[{k}], __hi[{k}];",
            f"        cpufree::split_blocks(__elems, {k}, {inferred}, gridDim.x, blockDim.x, __lo, __hi);",
            f"        __scope{s} = cpufree::share_of(__lo, __hi, {k}, gridDim.x, blockIdx.x);",
            "    }",
        ]
        globals_ += f"__device__ cpufree::PartBarrier __cpufree_part_bar{s}[{k}];\n"
    return lines, globals_ + ("\n" if globals_ else "")
