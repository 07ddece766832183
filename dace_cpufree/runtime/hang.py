"""Hang reports of kernels built with ``debug_waits``: the channel's report words as an error a user can act on."""

from __future__ import annotations

from dace_cpufree.errors import KernelHang


def hang_report(host) -> KernelHang | None:
    """The :class:`KernelHang` that a kernel built with ``debug_waits`` reported through the channel of ``host`` (a
    :class:`~.channel.ChannelHost`): a grid sync that waited too long, or blocks that met at different grid syncs;
    ``None`` where it reported none."""
    facts = host.facts
    if facts.debug_waits is None or host.hang_word("SITE") == 0:
        return None
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
        host.step_sources.get(facts.site_steps.get(site, ""), ""),
        block,
        missing if missing >= 0 else None,
        None if missing_site <= 0 else facts.sites[missing_site - 1],
    )
