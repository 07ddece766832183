"""What a tasklet of the device <-> host channel carries, shared by the frontend that marks it and the generator that
reads it back (``codegen/channel.py``): a string tag's number, a wait's facts and a host call's C++ body (the
tasklets' typed facts themselves, :class:`~dace_cpufree.facts.HostCall` among them, are declared in
:mod:`dace_cpufree.facts`).

The numbers are CRCs of text, the same in every program and process, so the runtime can name a tag or a wait from
the number the kernel sends.
"""

from __future__ import annotations

import zlib

from dace_cpufree.facts import HostCall


def tag_number(tag: str) -> int:
    """The number a string notification tag travels as (a CRC: the same in every program and process)."""
    return zlib.crc32(tag.encode()) & 0x7FFFFFFF


def wait_fact(flag: str, source: str) -> dict:
    """What the tasklet of a wait for a peer's signal carries for the channel (the fields of its ``wait`` fact,
    ``facts.WaitMark``): its number (a CRC; 0 and 1 are an Allreduce's and a PE barrier's waits), the flag and the
    program line."""
    where = source.rsplit("/", 1)[-1]  # the number does not depend on where the program's file lies
    number = tag_number(f"{flag} {where}")
    return {"id": number if number > 1 else number + 2, "flag": flag, "source": source}


def call_code(call: HostCall, args: list[str], results: list[str]) -> str:
    """The C++ body of a host callback's tasklet: the leader writes the arguments to the call slot and waits for
    the host's answer (``cpufree::channel::call``). ``args``/``results``: the tasklet's connectors, in order."""
    words = ", ".join(f"cpufree::channel::to_word({a})" for a in args) or "0"
    lines = [f"long long __cpufree_args[{max(len(args), 1)}] = {{{words}}};"]
    lines.append(f"long long __cpufree_results[{max(len(results), 1)}] = {{0}};")
    lines.append(f"cpufree::channel::call({call.id}, __cpufree_args, {len(args)}, __cpufree_results, {len(results)});")
    for k, (conn, kind) in enumerate(zip(results, call.results)):
        lines.append(f"{conn} = cpufree::channel::from_word<decltype({conn})>(__cpufree_results[{k}], '{kind}');")
    return "\n".join(lines)
