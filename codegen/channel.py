"""The device <-> host channel of a running kernel, as the generator prints it (``cpufree/channel.cuh``).

With the channel on, the kernel gets cancel points (``CPUFREE_CHANNEL_POINT``: the head of every loop, and
``CPUFREE_CHANNEL_BEFORE_SYNC``/``AFTER_SYNC`` around every grid sync), the top-level loops report their iteration
as progress when asked, and the library gets the host entry points of :data:`CHANNEL_HOST`. With it off, nothing
of this is printed: the generated code is the same as without this module.

The channel's memory layout is declared here once (:class:`ChannelLayout`): the generator defines its indices for
the header, and the runtime reads them from :attr:`KernelSource.channel` (a :class:`ChannelFacts`). What the
frontend's tasklets carry for it (tag numbers, waits' and host calls' facts) is declared in :mod:`dace_cpufree.facts`
(the tasklets' ``channel``, ``notify_tag``, ``wait`` and ``call``) and :mod:`dace_cpufree.channel_marks`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dace_cpufree.channel_marks import tag_number
from dace_cpufree.facts import CpufreeTasklet, HostCall

from . import ir

EVERY = ir.Executor.EVERY

#: words of the channel's header, in order (see cpufree/channel.cuh for their meaning)
#: (in a program that communicates: PEER the number + 1 of the peer whose stop made this PE stop, LEFT set when a
#: wait for a peer's signal was left because a PE stops: the kernel's results are not complete even if it ran on)
HEADER_WORDS = ("DONE", "TOTAL", "STOPPED", "SYNCS", "TAIL", "DROPPED", "PEER", "LEFT")
HEADER = 8  # words before the ring
RECORD = 3  # words per notification record: seq, tag, value bits
#: words of the host-call slot, after the ring (only with host callbacks); then the request's and the answer's
#: flagged words (two per argument, two per result: ARG_WORDS, RESULT_WORDS) and the host's unpacked ARGS, RESULTS
CALL_WORDS = ("REQ", "LATE", "HEAD", "ANSWER", "ID")
#: words of the hang report, after the call slot (only with ``debug_waits``)
#: (PE, WAIT, EXPECTED, VALUE: a wait for a peer's signal that lasted too long, in a program that communicates)
HANG_WORDS = (
    "SITE", "BLOCK", "ARRIVED", "GRID", "MISSING", "MISSING_SITE", "MISSING_SYNCS", "SYNCS", "KIND",
    "PE", "WAIT", "EXPECTED", "VALUE",
)  # fmt: skip
#: word kinds of a host call's arguments and results: float64 bits, int64, bool
VALUE_KINDS = ("f", "i", "b")


@dataclass(frozen=True)
class ChannelSpec:
    """What the generator is asked for when the channel is on.

    :ivar progress_loops: the top-level loops report their iteration as progress (``compile(..., progress=True)``).
    :ivar ring: notification records the ring holds; a notification made while it is full is dropped and counted.
    """

    progress_loops: bool = False
    ring: int = 1024
    #: with host callbacks: seconds the leader waits for the host's answer before it cancels the kernel
    call_timeout: float = 60.0
    #: debug mode: grid syncs become a barrier whose waiters give up after this many seconds, report where they
    #: waited through the channel and stop the kernel (``None``: plain ``grid.sync()``)
    debug_waits: float | None = None
    #: the program's string notification tags by number (:func:`program_channel`)
    tags: dict = field(default_factory=dict)
    #: in a program that communicates, its waits for peers' signals by number (:func:`program_waits`)
    waits: dict = field(default_factory=dict)


@dataclass
class ChannelFacts:
    """The channel of a generated kernel, for the runtime.

    :ivar ring: notification records in the ring.
    :ivar index: word index of each header word (``"DONE"``, ``"TOTAL"``, ...).
    :ivar header: words before the ring; :ivar record: words per record.
    :ivar sites: what each cancel point is (its number is the index), e.g. ``"grid sync before map_x"``.
    :ivar tags: notification tag number -> name, for tags given as strings in the program.
    """

    ring: int
    index: dict = field(default_factory=lambda: {name: k for k, name in enumerate(HEADER_WORDS)})
    header: int = HEADER
    record: int = RECORD
    sites: list = field(default_factory=list)
    tags: dict = field(default_factory=dict)
    #: host callbacks (:class:`~dace_cpufree.channel_marks.HostCall`), by id; empty: no call slot
    calls: list = field(default_factory=list)
    call_timeout: float = 60.0
    #: debug mode (``debug_waits`` seconds): the hang report's words follow the call slot
    debug_waits: float | None = None
    #: cancel point number of a grid sync -> the label of the step after it (its program line is in
    #: ``KernelSource.step_sources``)
    site_steps: dict = field(default_factory=dict)
    #: in a program that communicates: each wait for a peer's signal by its number (what a hang report names), as
    #: ``(what, source)``, e.g. ``("SignalWait on flags[0]", "file:line")``; numbers 0 and 1 are an Allreduce's and a
    #: PE barrier's waits
    waits: dict = field(default_factory=dict)
    #: cancel point number -> its program line, for points inside a step (a tile barrier between fused steps)
    site_sources: dict = field(default_factory=dict)

    @property
    def ring_end(self) -> int:
        return self.header + self.record * self.ring

    @property
    def call_args(self) -> int:
        """Argument words of the call slot (the most any call passes)."""
        return max((len(c.args) for c in self.calls), default=0)

    @property
    def call_results(self) -> int:
        return max((len(c.results) for c in self.calls), default=0)

    @property
    def call_at(self) -> int | None:
        """Word index of the call slot (``None``: no host callbacks)."""
        return self.ring_end if self.calls else None

    @property
    def call_index(self) -> dict:
        """Word index of each call slot word (``REQ``, ...), then of the first of ``ARG_WORDS``, ``RESULT_WORDS``,
        ``ARGS`` and ``RESULTS``."""
        if not self.calls:
            return {}
        at = self.call_at
        index = {name: at + k for k, name in enumerate(CALL_WORDS)}
        index["ARG_WORDS"] = at + len(CALL_WORDS)
        index["RESULT_WORDS"] = index["ARG_WORDS"] + 2 * self.call_args
        index["ARGS"] = index["RESULT_WORDS"] + 2 * self.call_results
        index["RESULTS"] = index["ARGS"] + self.call_args
        return index

    @property
    def call_words(self) -> int:
        """Words of the call slot (0: no host callbacks)."""
        return len(CALL_WORDS) + 3 * (self.call_args + self.call_results) if self.calls else 0

    @property
    def hang_at(self) -> int | None:
        """Word index of the hang report (``None``: not in debug mode)."""
        if self.debug_waits is None:
            return None
        return self.ring_end + self.call_words

    @property
    def hang_index(self) -> dict:
        at = self.hang_at
        return {} if at is None else {name: at + k for k, name in enumerate(HANG_WORDS)}

    @property
    def words(self) -> int:
        if self.hang_at is not None:
            return self.hang_at + len(HANG_WORDS)
        return self.ring_end + self.call_words

    def site(self, what: str) -> int:
        """Registers a cancel point and returns its number."""
        self.sites.append(what)
        return len(self.sites) - 1


def facts(spec: ChannelSpec, calls: list | None = None) -> ChannelFacts:
    if spec.ring < 1:
        raise ValueError(f"the notification ring needs at least one record, got {spec.ring}")
    if spec.debug_waits is not None and not spec.debug_waits > 0:
        raise ValueError(f"debug_waits must be a positive number of seconds, got {spec.debug_waits}")
    return ChannelFacts(
        spec.ring,
        calls=list(calls or ()),
        call_timeout=spec.call_timeout,
        debug_waits=spec.debug_waits,
        tags=dict(spec.tags),
        waits=dict(spec.waits),
    )


def prelude(channel: ChannelFacts) -> str:
    """The layout defines and the header include, printed before the kernel."""
    defines = [f"#define CPUFREE_CHANNEL_{name} {k}" for name, k in channel.index.items()]
    defines += [f"#define CPUFREE_CHANNEL_HEADER {channel.header}", f"#define CPUFREE_CHANNEL_RING {channel.ring}"]
    # host callbacks and debug waits: their words after the ring (nothing printed without them)
    defines += [f"#define CPUFREE_CHANNEL_CALL_{name} {k}" for name, k in channel.call_index.items()]
    if channel.calls:
        defines.append(f"#define CPUFREE_CHANNEL_CALL_TIMEOUT_NS {int(channel.call_timeout * 1e9)}LL")
        defines.append(f"#define CPUFREE_CHANNEL_CALL_MAX_RESULTS {channel.call_results}")
    defines += [f"#define CPUFREE_CHANNEL_HANG_{name} {k}" for name, k in channel.hang_index.items()]
    if channel.debug_waits is not None:
        defines.append(f"#define CPUFREE_CHANNEL_HANG_TIMEOUT_NS {int(channel.debug_waits * 1e9)}LL")
    return "\n".join(defines) + "\n#include <cpufree/channel.cuh>\n\n"


def shmem_define(channel: ChannelFacts | None, shmem: bool, direct_stores: bool) -> str:
    """Printed before the SHMEM runtime's header in a program that communicates and has the channel: its waits for
    peers' signals are left when a PE stops (``cpufree::shmem::wait_ge``); 2: the peers are told by direct stores,
    1: by NVSHMEM's puts."""
    if channel is None or not shmem:
        return ""
    return f"#define CPUFREE_CHANNEL_SHMEM {2 if direct_stores else 1}\n"


def program_waits(sdfg) -> dict:
    """The waits for peers' signals of a program, by number: ``(what, source)``, e.g. ``("SignalWait on flags[0]",
    "file:line")`` (``source`` empty where the program line is not known)."""
    waits = {0: ("an Allreduce's wait for a peer's values", ""), 1: ("PE barrier's wait for the peers' arrivals", "")}
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, CpufreeTasklet) and node.wait is not None:
            waits[node.wait.id] = (f"SignalWait on {node.wait.flag}", node.wait.source or "")
    return waits


def grid_declaration(channel: ChannelFacts | None) -> str:
    """The kernel's ``__grid``: cooperative groups' grid, or in debug mode the channel's barrier that times out."""
    if channel is not None and channel.debug_waits is not None:
        return "cpufree::channel::DebugGrid __grid;"
    return "cg::grid_group __grid = cg::this_grid();"


def sync_lines(channel: ChannelFacts | None, label: str, grid: bool = True, item: ir.Item | None = None) -> list[str]:
    """A grid sync (``grid``) or block barrier before ``label`` (of ``item``), with the channel's part: a grid sync is a
    cancel point with the shared decision after it (inside a loop that reports progress, with the loop's position:
    ``item.progress_at``), or ``item.plain_sync`` (``loop_points``: another sync of the iteration is one) only
    counted; in debug mode a block barrier is the channel's, which reports a thread that does not arrive
    (``cpufree::channel::block_sync``), and the threads leave the kernel once it hung."""
    if channel is None:
        return ["__grid.sync();" if grid else "__syncthreads();"]
    if grid and item is not None and item.plain_sync and channel.debug_waits is None:
        return ["__grid.sync();", "CPUFREE_CHANNEL_PLAIN_SYNC()"]
    site = channel.site(f"{'grid sync' if grid else 'block barrier'} before {label}")
    channel.site_steps[site] = label
    if grid:
        at = item.progress_at if item is not None else None
        check = f"CPUFREE_CHANNEL_BEFORE_SYNC_AT({site}, {at})" if at else f"CPUFREE_CHANNEL_BEFORE_SYNC({site})"
        return [check, "__grid.sync();", "CPUFREE_CHANNEL_AFTER_SYNC()"]
    if channel.debug_waits is None:
        return ["__syncthreads();"]
    return [f"cpufree::channel::block_sync({site}, __grid.passed);", *_left_when_hung(site)]


def _left_when_hung(site: int) -> list[str]:
    return [
        "if (cpufree::channel::hung()) {",
        f"    cpufree::channel::stopped(__tid, {site}, __grid.passed);",
        "    return;",
        "}",
    ]


def tile_sync(channel: ChannelFacts | None, where: str, source: str) -> str:
    """The barrier of a tile's lanes between two steps of a fused row group (``where``: before which, ``source``:
    its program line): in debug mode the channel's, which reports a lane that does not arrive
    (``cpufree::channel::tile_sync``)."""
    if channel is None or channel.debug_waits is None:
        return "__tile.sync();"
    site = channel.site(f"tile barrier {where}")
    channel.site_sources[site] = source
    return f"cpufree::channel::tile_sync(__tile, {site});"


#: the progress tick at a loop's head: counted, and shown every CPUFREE_CHANNEL_PROGRESS_EVERY iterations ...
TICK_SHOWN = "if (__tid == 0) cpufree::channel::loop_tick(__cpufree_leader);"
#: ... or counted only: the looks of the cancel path show it (a loop with a grid sync in its body)
TICK_COUNTED = "if (__tid == 0) cpufree::channel::loop_count(__cpufree_leader);"


@dataclass
class LoopHead:
    """What the first item of a loop's body does: a cancel point at channel site ``site`` (``cancel``), and the
    iteration counted (``tick``: :data:`TICK_SHOWN`, :data:`TICK_COUNTED` or ``None``). ``loop_points`` settles both
    once the grid syncs are placed; the item's code is :meth:`code` of what it settled."""

    site: int
    cancel: bool = True
    tick: str | None = None

    def code(self) -> list[str]:
        point = [f"CPUFREE_CHANNEL_POINT({self.site})"] if self.cancel else []
        return point + ([self.tick] if self.tick is not None else [])


def loop_head(channel: ChannelFacts, label: str, progress: bool) -> ir.Item:
    """The first item of a loop's body: a cancel point, and with ``progress`` the iteration counted (the total is the
    leader's since ``loop_begin``); its facts are ``Item.head`` (:class:`LoopHead`)."""
    head = LoopHead(channel.site(f"head of loop {label}"), tick=TICK_SHOWN if progress else None)
    item = ir.Item(f"cancel point {label}", head.code(), executor=EVERY)
    item.head = head
    return item


def loop_bracket(label: str, counted: tuple | None, var: str | None) -> tuple[ir.Item, ir.Item]:
    """Items before and after a loop that reports progress: iteration 0, and the last. ``counted``: C++ of its
    iteration count, first value and stride where its range is known, with ``var`` its variable (the position the
    looks read); else ``None`` for both, and the leader counts the iterations begun (``Leader::ticks``), no total
    known."""
    total, start, stride = counted if var else ("0", "1", "1")
    at = var or "__cpufree_leader.ticks + 1"  # one past the last iteration
    begin = ir.Item(
        f"progress before {label}",
        [f"if (__tid == 0) cpufree::channel::loop_begin({total}, {start}, {stride});"],
        executor=EVERY,
    )
    end = ir.Item(f"progress after {label}", [f"if (__tid == 0) cpufree::channel::loop_end({at});"], executor=EVERY)
    return begin, end


CHANNEL_HOST = """
// ---- device <-> host channel (cpufree/channel.cuh) --------------------------------------------------------------
// Allocated on the first call and kept: host-mapped pinned memory the kernel writes and the host polls.
extern "C" long long *cpufree_channel_open() {{
    static long long *host = nullptr;
    if (host == nullptr) {{
        long long *device = nullptr;
        host = static_cast<long long *>(cpufree::channel::host_alloc(sizeof(long long) * {words}, &device));
        if (host == nullptr) cpufree_fail("allocating the channel's host-mapped memory failed");
    }}
    return host;
}}
extern "C" int cpufree_channel_words() {{ return {words}; }}
extern "C" unsigned long long cpufree_channel_dropped() {{ return cpufree::channel::dropped(); }}
extern "C" int cpufree_channel_cancel(int value) {{
    const int e = cpufree::channel::set_cancel(value);
    if (e != 0) cpufree_fail("passing the stop request to the device failed (error %d)", e);
    return e;
}}
"""

CALL_HOST = """// Host callbacks: the poller waits here (GIL released) for the next request (at most `timeout_ns` ns)
// and answers it.
extern "C" long long cpufree_channel_wait_call(long long answered, long long timeout_ns) {
    return cpufree::channel::wait_call(answered, timeout_ns);
}
extern "C" void cpufree_channel_answer(long long request, long long status) {
    cpufree::channel::answer(request, status);
}
"""


DEBUG_HOST = """// Debug waits: the grid barrier is emptied before each launch (0: done).
extern "C" int cpufree_debug_reset() { return cpufree::channel::debug_reset(); }
"""


def host_code(channel: ChannelFacts) -> str:
    code = CHANNEL_HOST.format(words=channel.words)
    code += CALL_HOST if channel.calls else ""
    return code + (DEBUG_HOST if channel.debug_waits is not None else "")


def program_calls(sdfg) -> list[HostCall]:
    """The host callbacks of a program (the ``call`` facts of its tasklets), by id."""
    found = {}
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, CpufreeTasklet) and node.channel == "call":
            found[node.call.id] = node.call
    return [found[k] for k in sorted(found)]


def program_channel(sdfg) -> tuple[bool, dict]:
    """Whether the program uses the channel (tasklets with a ``channel`` fact: ``progress``, ``notify``, host calls),
    and the names of its string notification tags by number."""
    uses, tags = False, {}
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, CpufreeTasklet) and node.channel:
            uses = True
            if node.notify_tag:
                tags[tag_number(node.notify_tag)] = node.notify_tag
    return uses, tags
