"""The device <-> host channel of a running kernel, as the generator prints it (``cpufree/channel.cuh``).

With the channel on, the kernel gets cancel points (``CPUFREE_CHANNEL_POINT``: the head of every loop, and
``CPUFREE_CHANNEL_BEFORE_SYNC``/``AFTER_SYNC`` around every grid sync), the top-level loops report their iteration
as progress when asked, and the library gets the host entry points of :data:`CHANNEL_HOST`. With it off, nothing
of this is printed: the generated code is the same as without this module.

The channel's memory layout is declared here once (:class:`ChannelLayout`): the generator defines its indices for
the header, and the runtime reads them from :attr:`KernelSource.channel` (a :class:`ChannelFacts`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from dace.sdfg import nodes

from . import ir

EVERY = ir.Executor.EVERY

#: words of the channel's header, in order (see cpufree/channel.cuh for their meaning)
HEADER_WORDS = ("CANCEL", "DONE", "TOTAL", "STOPPED", "SYNCS", "TAIL", "DROPPED")
HEADER = 8  # words before the ring (one spare)
RECORD = 3  # words per notification record: seq, tag, value bits


@dataclass(frozen=True)
class ChannelSpec:
    """What the generator is asked for when the channel is on.

    :ivar progress_loops: the top-level loops report their iteration as progress (``compile(..., progress=True)``).
    :ivar ring: notification records the ring holds; a notification made while it is full is dropped and counted.
    """

    progress_loops: bool = False
    ring: int = 1024


@dataclass
class ChannelFacts:
    """The channel of a generated kernel, for the runtime.

    :ivar ring: notification records in the ring.
    :ivar index: word index of each header word (``"CANCEL"``, ``"DONE"``, ...).
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

    @property
    def words(self) -> int:
        return self.header + self.record * self.ring

    def site(self, what: str) -> int:
        """Registers a cancel point and returns its number."""
        self.sites.append(what)
        return len(self.sites) - 1


def facts(spec: ChannelSpec) -> ChannelFacts:
    if spec.ring < 1:
        raise ValueError(f"the notification ring needs at least one record, got {spec.ring}")
    return ChannelFacts(spec.ring)


def prelude(channel: ChannelFacts) -> str:
    """The layout defines and the header include, printed before the kernel."""
    defines = [f"#define CPUFREE_CHANNEL_{name} {k}" for name, k in channel.index.items()]
    defines += [f"#define CPUFREE_CHANNEL_HEADER {channel.header}", f"#define CPUFREE_CHANNEL_RING {channel.ring}"]
    return "\n".join(defines) + "\n#include <cpufree/channel.cuh>\n\n"


def sync_lines(channel: ChannelFacts | None, label: str) -> tuple[list[str], list[str]]:
    """Lines before and after a grid sync before ``label``: a cancel point, and the shared decision."""
    if channel is None:
        return [], []
    site = channel.site(f"grid sync before {label}")
    return [f"CPUFREE_CHANNEL_BEFORE_SYNC({site})"], ["CPUFREE_CHANNEL_AFTER_SYNC()"]


def loop_head(channel: ChannelFacts, label: str, total: str | None, progress: bool) -> ir.Item:
    """The first item of a loop's body: a cancel point, and with ``progress`` the iteration reported."""
    site = channel.site(f"head of loop {label}")
    code = [f"CPUFREE_CHANNEL_POINT({site})"]
    if progress:
        code.append(f"if (__tid == 0) cpufree::channel::loop_tick({total or 0});")
    return ir.Item(f"cancel point {label}", code, executor=EVERY)


def loop_bracket(label: str, total: str | None) -> tuple[ir.Item, ir.Item]:
    """Items before and after a loop that reports progress: iteration 0 of ``total``, and the last."""
    total = total or "0"
    return tuple(
        ir.Item(f"progress {at} {label}", [f"if (__tid == 0) cpufree::channel::{call}({total});"], executor=EVERY)
        for at, call in (("before", "loop_begin"), ("after", "loop_end"))
    )


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
"""


def host_code(channel: ChannelFacts) -> str:
    return CHANNEL_HOST.format(words=channel.words)


def tag_number(tag: str) -> int:
    """The number a string notification tag travels as (a CRC: the same in every program and process)."""
    return zlib.crc32(tag.encode()) & 0x7FFFFFFF


def program_channel(sdfg) -> tuple[bool, dict]:
    """Whether the program calls ``progress``/``notify`` (tasklets marked ``cpufree_channel`` in their location),
    and the names of its string notification tags by number."""
    uses, tags = False, {}
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, nodes.Tasklet) and (node.location or {}).get("cpufree_channel"):
            uses = True
            name = node.location.get("cpufree_notify_tag")
            if name:
                tags[tag_number(str(name))] = str(name)
    return uses, tags
