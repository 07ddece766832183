"""Hang reports of kernels built with ``debug_waits``: the channel's report words as an error a user can act on."""

from __future__ import annotations

from dace_cpufree.errors import KernelHang


def hang_report(host) -> KernelHang | None:
    """The :class:`KernelHang` that a kernel built with ``debug_waits`` reported through the channel of ``host`` (a
    :class:`~.channel_memory.ChannelHost`): a grid sync that waited too long, or blocks that met at different grid
    syncs; ``None`` where it reported none."""
    facts = host.facts
    if facts.debug_waits is None or host.hang_word("SITE") == 0:
        return None
    if host.hang_word("KIND") == 3:
        return _wait_report(host)
    if host.hang_word("KIND") in (4, 5, 6):
        return _barrier_report(host)
    site = host.hang_word("SITE") - 1
    where = host.site_text(site)
    block, arrived, grid = host.hang_word("BLOCK"), host.hang_word("ARRIVED"), host.hang_word("GRID")
    missing, missing_site = host.hang_word("MISSING"), host.hang_word("MISSING_SITE")
    last = host.site_text(missing_site - 1) if missing_site > 0 else "none (it never reached a grid sync)"
    if host.hang_word("KIND") == 1:
        what = (
            f"the blocks met at different grid syncs: block {block} arrived last at the {where}, while block "
            f"{missing} waits at the {last} (after {host.hang_word('MISSING_SYNCS')} grid syncs; block {block} "
            f"after {host.hang_word('SYNCS')})"
        )
    else:
        counted = f"; {arrived} of {grid} blocks had arrived" if arrived else ""
        other = (
            f"; block {missing} was not there: the last grid sync it reached was the {last}"
            f" (after {host.hang_word('MISSING_SYNCS')} grid syncs)"
            if missing >= 0
            else ""
        )
        waited = (
            "waits, and the race checker saw that it can never complete,"
            if host.hang_word("KIND") == 2
            else f"waited more than {facts.debug_waits:g} s"
        )
        what = f"block {block} {waited} at the {where} (after {host.hang_word('SYNCS')} grid syncs){counted}{other}"
    return KernelHang(
        f"{host.program}: hang: {what}. The kernel stopped there instead of hanging. Fix: every block must "
        "reach every grid sync: look for a branch or loop that only some blocks take, or a wait (SignalWait, a "
        "spin on a flag) before that step that never ends; if the program has none, the generator placed the "
        "sync wrongly: report the program.",
        facts.sites[site] if 0 <= site < len(facts.sites) else str(site),
        host.site_source(site),
        block,
        missing if missing >= 0 else None,
        None if missing_site <= 0 else facts.sites[missing_site - 1],
    )


def _wait_report(host) -> KernelHang:
    """A wait for a peer's signal (SignalWait, an Allreduce's wait) that lasted past the timeout, in a program that
    communicates: this PE and its peers stopped."""
    facts = host.facts
    wait = host.hang_word("WAIT")
    kind, source = facts.waits.get(wait, (f"wait {wait}", ""))
    what = f"{kind} at {source}" if source else kind
    pe, block = host.hang_word("PE"), host.hang_word("BLOCK")
    expected, value = host.hang_word("EXPECTED"), host.hang_word("VALUE")
    return KernelHang(
        f"{host.program}: hang on PE {pe}: block {block} waited more than {facts.debug_waits:g} s in the {what} for "
        f"the flag to reach {expected}; it holds {value}. This PE and its peers stopped instead of hanging. Fix: the "
        "Putmem (or Allreduce) that signals this flag must target PE "
        f"{pe} with a signal value of at least {expected} on the same step: check its target PE, its flag and its "
        "signal, and that the PE that sends it does not skip that step (a branch on its position).",
        what,
        source,
        block,
        None,
        None,
    )


def _barrier_report(host) -> KernelHang:
    """A block barrier (kind 4, or 6: the one each block makes at a grid sync) or a tile barrier (kind 5) that a
    thread of the block did not reach in time."""
    facts = host.facts
    site = host.hang_word("SITE") - 1
    block, arrived, size = host.hang_word("BLOCK"), host.hang_word("ARRIVED"), host.hang_word("GRID")
    missing, first, syncs = host.hang_word("MISSING"), host.hang_word("MISSING_SITE"), host.hang_word("SYNCS")
    kind = host.hang_word("KIND")
    tile = kind == 5
    where = ("block barrier of the " if kind == 6 else "") + host.site_text(site)  # 6: before a grid sync
    who = (
        f"threads {first}-{first + size - 1} of block {block} (a tile)"
        if tile
        else f"the {size} threads of block {block}"
    )
    after = f" (after {syncs} grid syncs)" if syncs >= 0 else ""
    absent = size - arrived
    late = (
        "a thread did not arrive"
        if missing < 0
        else f"thread {missing} did not arrive"
        if absent == 1
        else f"{absent} threads did not arrive, the first thread {missing} (a thread's warp waits for it where "
        "their paths join, so one late thread keeps the rest of its warp away)"
    )
    timeout = facts.debug_waits * (1.125 if tile else 1.25)
    return KernelHang(
        f"{host.program}: hang: {late}: {arrived} of {who} waited more than {timeout:g} s at the {where}{after}. "
        "The kernel stopped there instead of hanging. Fix: that thread runs much longer than its block (a loop "
        "whose bound depends on the element, e.g. a while loop that does not end for some values) or waits for "
        "something that never comes; if the program has none, the generator placed the barrier wrongly: report "
        "the program.",
        facts.sites[site] if 0 <= site < len(facts.sites) else str(site),
        host.site_source(site),
        block,
        None,
        None,
        thread=missing if missing >= 0 else None,
        threads=absent if missing >= 0 else None,
    )
