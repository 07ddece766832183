"""The ``Putmem`` library node: write a local region into the same region of another PE's memory.

``Putmem(dest, src, pe, flag=None, signal=None)`` in a ``@dace.program`` becomes this node: it reads
``src`` and, in the SPMD reading of the program, writes ``dest`` (on PE ``pe``) and, with a signal,
sets ``flag`` there to ``signal`` once the data has arrived. Expansions (one per SHMEM library):

- contiguous ends: ``nvshmemx_putmem[_nbi]_block`` (with a signal ``nvshmemx_putmem_signal[_nbi]_block``);
- strided ends: the block's threads split the rows along the last dimension and issue
  ``nvshmem_<T>_iput`` each; then one thread ``nvshmem_quiet()`` and ``nvshmemx_signal_op``;
- rows that are dense on both ends (a 3-D halo plane's interior): the rows are dealt out over the
  blocks of the put's lane (every ``lanes``-th block of the grid), one warp-cooperative
  ``nvshmemx_putmem_nbi_warp`` per row; each block quiets its rows, the last one to finish sets the flag;
- NVSHMEM on one node (``NVSHMEM_P2P``): the kernel's own stores through ``nvshmem_ptr``
  (``cpufree::shmem::p2p``), every layout alike: the put's elements are dealt out over the blocks of its
  lane (as many blocks as allow 1 element per thread when a wait follows the put, 4 when later work hides it:
  ``p2p::blocks_for``), each thread loads a batch before it stores it (``p2p::copy``); each block's thread 0
  fences (the quiet) and the last block to finish sets the flag with a release store. The block does not
  wait for its thread 0 to get through the fence: a store that has been issued has read its source, so the
  block may go on (and overwrite the source) at once;
- ROC_SHMEM: ``rocshmem_putmem[_signal][_nbi]_wg``; strided ends as element puts ``rocshmem_<T>_p``,
  then ``rocshmem_quiet()`` and ``rocshmem_uint64_atomic_set`` for the signal; dense rows as above with
  ``rocshmem_putmem_nbi_wave``.

The tasklet (a :class:`~dace_cpufree.facts.CpufreeTasklet`) is executed by all threads of one thread block
(``executor = "block"``, block ``block``), or for dense rows by the blocks of a lane (``"blocks"``, lane ``block``
of ``lanes``). ``_dest`` and ``_flag`` address another PE's memory and are listed in its ``remote``: the kernel
generator binds them as pointers but does not count them as local accesses.
"""

from __future__ import annotations

import dace
from dace import library
from dace.properties import Property, SymbolicProperty
from dace.sdfg import nodes
from dace.transformation.transformation import ExpandTransformation

from dace_cpufree.cpp import INDEX_T, cexpr, indent
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.facts import CpufreeTasklet, placement
from dace_cpufree.vocabulary import PutForm

from .environments import NVSHMEM, ROCSHMEM
from .layout import PutLayout
from .shmem_api import NVSHMEM_API, NVSHMEM_P2P_API, ROCSHMEM_API, ShmemAPI


def _edge(state, node, conn: str, out: bool):
    edges = state.out_edges_by_connector(node, conn) if out else state.in_edges_by_connector(node, conn)
    return next(iter(edges))


def _check_prepared(node) -> None:
    if not node.prepared:
        raise NotPersistableError(
            f"{type(node).__name__} '{node.label}' can only run inside a persistent kernel: GPU-initiated "
            "communication needs the whole program on the device. Fix: build the program with "
            "dace_cpufree.compile(...) (or dace_cpufree.persistent_sdfg), not with DaCe's own code generator."
        )


def expression_symbols(*exprs) -> set[str]:
    """Free symbols of expression properties (DaCe must see them, or simplify drops their definitions)."""
    out = set()
    for e in exprs:
        out |= {str(s) for s in dace.symbolic.pystr_to_symbolic(str(e)).free_symbols}
    return out


def value_text(node, prop: str, conn: str) -> str:
    """C++ text of a value given as a property expression or through connector ``conn``."""
    return conn if conn in node.in_connectors else cexpr(getattr(node, prop))


def _contiguous_call(node, api: ShmemAPI, nbytes: str, pe: str) -> list[str]:
    nbi = "" if node.blocking else "_nbi"
    if node.signalled:
        sig = value_text(node, "signal", "_signal")
        call = api.putmem_signal.format(nbi=nbi)
        return [f"{call}(_dest, _src, {nbytes}, _flag, (uint64_t)({sig}), {api.signal_set}, {pe});"]
    return [f"{api.putmem.format(nbi=nbi)}(_dest, _src, {nbytes}, {pe});"]


def _quiet_then_signal(node, api: ShmemAPI, pe: str, arrivals: str | None = None) -> list[str]:
    """One thread completes the block's puts (``quiet``: the data is visible at the target) and then, for a
    signalled put, sets the target's flag; with ``arrivals`` (the number of blocks sharing the put) only the
    last block to get there sets it, counted on a counter of the put's own."""
    lines = ["if (threadIdx.x == 0) {", f"    {api.quiet}"]
    if arrivals is not None:
        lines.append("    static unsigned int __arrived = 0;  // blocks done with this put in this round")
    if node.signalled:
        sig = value_text(node, "signal", "_signal")
        signal = api.signal_op.format(flag="_flag", value=f"(uint64_t)({sig})", pe=pe)
        gate = f"if (cpufree::shmem::last_of(&__arrived, {arrivals})) " if arrivals is not None else ""
        lines.append(f"    {gate}{signal}")
    return lines + ["}"]


def _dense_rows(node, layout: PutLayout, api: ShmemAPI, elem: str, pe: str) -> list[str]:
    """Rows that are dense on both ends (a plane's interior), shared by the blocks of the put's lane
    (``__part`` of ``__parts``, at most one block per row): each block's warps put its rows with one
    warp-cooperative ``putmem_nbi`` per row, then its thread 0 completes them (``quiet``); the last block
    to finish sets the target's flag. (From one block, jacobi_3d's 126 x 126 planes cost about 25 us per
    step on 4 H200s; spread over 66 blocks per plane, the same: that block's stores were not the limit.)"""
    rows, length, _, _ = layout.rows()
    lines = [
        f"const {INDEX_T} __rows = {rows};",
        f"const unsigned int __use = (unsigned int)cpufree::min_<{INDEX_T}>(__parts, "
        f"cpufree::max_<{INDEX_T}>(1, __rows));",
        "if (__part < __use) {",
        f"    const {INDEX_T} __r0 = __rows * __part / __use, __r1 = __rows * (__part + 1) / __use;",
        "    const int __warps = (int)(blockDim.x / warpSize), __warp = (int)(threadIdx.x / warpSize);",
        f"    for ({INDEX_T} __r = __r0 + __warp; __r < __r1; __r += __warps) {{",
    ]
    lines += indent(layout.decode("__r", len(layout.dims) - 1), 2)
    lines += [
        f"        {api.putmem_warp.format(nbi='_nbi')}(_dest + __do, _src + __so, "
        f"(size_t)({length}) * sizeof({elem}), {pe});",
        "    }",
        "    __syncthreads();",
    ]
    lines += indent(_quiet_then_signal(node, api, pe, arrivals="__use"))
    return lines + ["}"]


def _direct_stores(node, layout: PutLayout, api: ShmemAPI, pe: str) -> list[str]:
    """Any layout by the kernel's own stores, shared by the blocks of the put's lane (``__part`` of
    ``__parts``): block ``p`` of the ``__use`` taking part copies elements ``[n p / use, n (p + 1) / use)``,
    a thread every ``blockDim.x``-th (``p2p::copy``: a batch of loads, then their stores); the offsets of
    element ``k`` in the source and the destination come from its digits over the put's dimensions.
    Then each block's thread 0 fences (the quiet), and the last block to get there sets the flag.
    Elements per thread (``p2p::blocks_for``): a put on the critical path (the next wait follows it) is spread
    as wide as one element per thread allows; one hidden by later work (``Putmem.hidden``) takes 4 per thread,
    so that fewer blocks pay its fence (and a put that one block can do needs no arrival count). Measured on
    4 H200s, weak scaling at 4 GPUs, both per-thread counts for every put: overlapped forms 0.946 -> 0.955
    (2-D), 0.928 -> 0.937 (3-D) with 4; plain forms 0.907 -> 0.877, 0.893 -> 0.885.
    A single-block put was the limit: jacobi_2d's 4096-element columns, 4 load-store pairs in a chain on
    each thread of one block, delayed that block's share of the next stencil by microseconds."""
    if layout.contiguous:
        at = ["__s = __k; __d = __k;"]
    else:
        at = layout.decode("__k", len(layout.dims)) + ["__s = __so; __d = __do;"]
    per_thread = "CPUFREE_P2P_PER_THREAD_HIDDEN" if node.hidden else "CPUFREE_P2P_PER_THREAD"
    lines = [
        f"const {INDEX_T} __n = {cexpr(layout.count)};",
        f"const unsigned int __use = cpufree::shmem::p2p::blocks_for(__n, __parts, {per_thread});",
        "if (__part < __use) {",
        f"    cpufree::shmem::p2p::copy(cpufree::shmem::p2p::peer(_dest, {pe}), _src, "
        "__n * __part / __use + threadIdx.x, __n * (__part + 1) / __use, blockDim.x,",
        f"        [&]({INDEX_T} __k, {INDEX_T} &__s, {INDEX_T} &__d) {{",
        *indent(at, 3),
        "        });",
        "    __syncthreads();",
    ]
    lines += indent(_quiet_then_signal(node, api, pe, arrivals="__use"))
    return lines + ["}"]


def _strided_nvshmem(node, layout: PutLayout, tname: str, pe: str, api: ShmemAPI) -> list[str]:
    """Rows along the last dimension, split over the block's threads (a row may be split in parts)."""
    rows, length, sstride, dstride = layout.rows()
    outer = len(layout.dims) - 1
    lines = [
        f"const {INDEX_T} __rows = {rows}, __len = {length};",
        f"const {INDEX_T} __parts = cpufree::max_<{INDEX_T}>(1, (long long)blockDim.x / __rows);",
        f"const {INDEX_T} __chunk = (__len + __parts - 1) / __parts;",
        f"for ({INDEX_T} __u = threadIdx.x; __u < __rows * __parts; __u += blockDim.x) {{",
        f"    const {INDEX_T} __lo = (__u % __parts) * __chunk;",
        f"    const {INDEX_T} __cnt = cpufree::min_<{INDEX_T}>(__chunk, __len - __lo);",
        "    if (__cnt <= 0) continue;",
    ]
    lines += indent(layout.decode("__u / __parts", outer))
    lines += [
        f"    {api.iput.format(t=tname)}(_dest + __do + __lo * ({dstride}), _src + __so + __lo * ({sstride}), "
        f"(ptrdiff_t)({dstride}), (ptrdiff_t)({sstride}), (size_t)__cnt, {pe});",
        "}",
    ]
    if node.signalled:
        # iput is complete at the source only; quiet makes the data visible at the target before the flag.
        lines += ["__syncthreads();"] + _quiet_then_signal(node, api, pe)
    return lines + ["__syncthreads();"]


def _strided_rocshmem(node, layout: PutLayout, tname: str, pe: str, api: ShmemAPI) -> list[str]:
    """rocSHMEM has no strided put: element puts over the work-group's threads (packing and put in one)."""
    ctype = {"longlong": "long long", "ulonglong": "unsigned long long", "schar": "signed char"}.get(tname, tname)
    lines = [f"for ({INDEX_T} __u = threadIdx.x; __u < {cexpr(layout.count)}; __u += blockDim.x) {{"]
    lines += indent(layout.decode("__u", len(layout.dims)))
    lines += [f"    rocshmem_{tname}_p(({ctype} *)(_dest + __do), ({ctype})_src[__so], {pe});", "}", "__syncthreads();"]
    if node.signalled:
        lines += _quiet_then_signal(node, api, pe) + ["__syncthreads();"]
    elif node.blocking:
        lines += [f"if (threadIdx.x == 0) {api.quiet}", "__syncthreads();"]
    return lines


def put_layout(node, state, sdfg) -> PutLayout:
    """The layout of the put's two ends."""
    src, dest = _edge(state, node, "_src", False).data, _edge(state, node, "_dest", True).data
    return PutLayout.of(sdfg.arrays[src.data], src.subset, sdfg.arrays[dest.data], dest.subset)


def put_form(api: ShmemAPI, layout: PutLayout) -> PutForm:
    """How a put with ``layout`` moves its data with ``api``."""
    if api.direct:
        return PutForm.DIRECT
    if layout.contiguous:
        return PutForm.CONTIGUOUS
    return PutForm.ROWS if layout.shared_rows else PutForm.STRIDED


def put_code(node, state, sdfg, api: ShmemAPI, layout: PutLayout) -> str:
    """The C++ body of the put tasklet for ``api``."""
    sdesc = sdfg.arrays[_edge(state, node, "_src", False).data.data]
    pe = f"(int)({value_text(node, 'pe', '_pe')})"
    form = put_form(api, layout)
    if form == PutForm.DIRECT:
        return "\n".join(_direct_stores(node, layout, api, pe))
    if form == PutForm.CONTIGUOUS:
        nbytes = f"(size_t)({cexpr(layout.count)}) * sizeof({sdesc.dtype.ctype})"
        return "\n".join(_contiguous_call(node, api, nbytes, pe))
    if form == PutForm.ROWS:
        return "\n".join(_dense_rows(node, layout, api, sdesc.dtype.ctype, pe))
    tname = api.type_name(sdesc.dtype)
    strided = _strided_nvshmem if api.iput else _strided_rocshmem
    return "\n".join(strided(node, layout, tname, pe, api))


def _expand(node, state, sdfg, api: ShmemAPI) -> nodes.Tasklet:
    _check_prepared(node)
    inputs = {c: dace.pointer(sdfg.arrays[_edge(state, node, c, False).data.data].dtype) for c in ("_src",)}
    for conn in ("_pe", "_signal"):
        if conn in node.in_connectors:
            inputs[conn] = sdfg.arrays[_edge(state, node, conn, False).data.data].dtype
    outputs = {c: dace.pointer(sdfg.arrays[_edge(state, node, c, True).data.data].dtype) for c in node.out_connectors}
    remote = [c for c in ("_dest", "_flag") if c in outputs]
    layout = put_layout(node, state, sdfg)
    form = put_form(api, layout)
    executor = "blocks" if form in (PutForm.ROWS, PutForm.DIRECT) else "block"
    # direct stores: the block need not wait for its thread 0's fence (see _direct_stores)
    where = placement(executor, node.block, remote, node.lanes, exit_barrier=not api.direct)
    code = put_code(node, state, sdfg, api, layout)
    return CpufreeTasklet(node.label, inputs, outputs, code, **where, put=form, put_hidden=bool(node.hidden))


@library.expansion
class ExpandPutmemNVSHMEM(ExpandTransformation):
    environments = [NVSHMEM]

    @staticmethod
    def expansion(node, parent_state, parent_sdfg, **kwargs):
        return _expand(node, parent_state, parent_sdfg, NVSHMEM_API)


@library.expansion
class ExpandPutmemNVSHMEMP2P(ExpandTransformation):
    environments = [NVSHMEM]

    @staticmethod
    def expansion(node, parent_state, parent_sdfg, **kwargs):
        return _expand(node, parent_state, parent_sdfg, NVSHMEM_P2P_API)


@library.expansion
class ExpandPutmemROCSHMEM(ExpandTransformation):
    environments = [ROCSHMEM]

    @staticmethod
    def expansion(node, parent_state, parent_sdfg, **kwargs):
        return _expand(node, parent_state, parent_sdfg, ROCSHMEM_API)


@library.node
class Putmem(nodes.LibraryNode):
    """Writes ``src`` (connector ``_src``) into ``dest`` (``_dest``) on PE ``pe``; with a signal, sets
    ``flag`` (``_flag``) on that PE to ``signal`` after the data.

    ``pe`` and ``signal`` are expressions (properties) or scalars in memory (connectors ``_pe``,
    ``_signal``). ``blocking`` and ``block`` are decided by the communication passes.
    """

    implementations = {
        "NVSHMEM": ExpandPutmemNVSHMEM,
        "NVSHMEM_P2P": ExpandPutmemNVSHMEMP2P,
        "ROCSHMEM": ExpandPutmemROCSHMEM,
    }
    default_implementation = "NVSHMEM"

    pe = SymbolicProperty(default=0, desc="target PE (an expression); unused with connector _pe")
    signal = SymbolicProperty(default=0, desc="signal value (an expression); unused with connector _signal")
    signalled = Property(dtype=bool, default=False, desc="whether the put sets a flag on the target")
    blocking = Property(dtype=bool, default=True, desc="blocking put (source reusable on return) or _nbi")
    block = Property(dtype=int, default=0, desc="thread block (modulo the grid) that issues the put")
    lanes = Property(
        dtype=int, default=1, desc="puts issued at the same time as this one (their blocks share the grid)"
    )
    hidden = Property(
        dtype=bool, default=False, desc="other work comes before the next wait: the put's latency is hidden by it"
    )
    prepared = Property(dtype=bool, default=False, desc="placed in a persistent kernel by PrepareCommunication")

    def __init__(self, name, pe="0", signal="0", signalled=False, pe_in=False, signal_in=False, **kwargs):
        inputs = {"_src"} | ({"_pe"} if pe_in else set()) | ({"_signal"} if signal_in else set())
        outputs = {"_dest"} | ({"_flag"} if signalled else set())
        super().__init__(name, inputs=inputs, outputs=outputs, **kwargs)
        self.pe, self.signal, self.signalled = pe, signal, signalled

    @property
    def free_symbols(self) -> set[str]:
        return super().free_symbols | expression_symbols(self.pe, self.signal)
