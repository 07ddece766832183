"""The device <-> host channel in programs that communicate: one channel per PE, no PE left waiting for one that
stopped, and hang reports of waits for a peer's signal.

CPU: the generated code and facts, nvcc builds linked against NVSHMEM (marked ``compile``: they fail, never skip, in
CI) and the host's reading of the report words. The refusal of a library collective and the channel in the suite's
solvers, and the ``mpirun`` jobs on 2 GPUs: tests/benchmarks/test_shmem_channel_jobs.py.
"""

import re
from types import SimpleNamespace

import pytest
from dace_cpufree.codegen.channel import ChannelFacts
from kernel_copies import shmem_jacobi_2d

import dace_cpufree
from dace_cpufree.channel_marks import wait_fact
from dace_cpufree.errors import KernelCancelled, KernelHang
from dace_cpufree.runtime import build
from dace_cpufree.runtime.channel import Call
from dace_cpufree.runtime.hang import hang_report

SYMBOLS = {"LX": 34, "LY": 34, "PY": 1}


def _source(program=shmem_jacobi_2d.plain, **options):
    return dace_cpufree.kernel_source(program, **options)


@pytest.mark.parametrize(("transport", "mode"), [("p2p", 2), ("proxy", 1)])
def test_channel_in_a_communicating_program_is_built_before_the_shmem_runtime(transport, mode):
    code = _source(channel=True, shmem_transport=transport, symbols=SYMBOLS).code
    define = code.index(f"#define CPUFREE_CHANNEL_SHMEM {mode}\n")
    assert define < code.index("#include <cpufree/shmem.cuh>") < code.index("#include <cpufree/channel.cuh>")
    plain = _source(shmem_transport=transport, symbols=SYMBOLS).code
    assert "#define CPUFREE_CHANNEL" not in plain and "channel.cuh" not in plain  # the waits keep the library's


def test_every_wait_is_named_in_the_facts_with_its_program_line():
    source = _source(channel=True)  # symbolic process grid: every neighbour's wait is in the code
    waits = source.channel.waits
    lines = {re.search(r"jacobi_2d\.py:(\d+)$", where).group(1) for k, (_, where) in waits.items() if k > 1}
    assert len(waits) == 10 and len(lines) == 8, waits  # an Allreduce's (0), a PE barrier's (1), 8 SignalWaits
    for flag in range(8):
        assert sum(what == f"SignalWait on flags[{flag}]" for what, _ in waits.values()) == 1
    for number in waits:
        if number > 1:
            assert f"cpufree::shmem::wait_ge(_flag, (uint64_t)(t), {number}u);" in source.code
    # the number does not depend on where the program's file lies
    assert wait_fact("flags[0]", "/a/jacobi_2d.py:38")["id"] == wait_fact("flags[0]", "/b/c/jacobi_2d.py:38")["id"]


@pytest.mark.compile
@pytest.mark.parametrize("transport", ["p2p", "proxy"])
@pytest.mark.parametrize(
    "options", [{"channel": True}, {"debug_waits": 2.0, "progress": True}], ids=["cancel", "debug"]
)
def test_channel_builds_link_against_nvshmem(transport, options):
    source = _source(shmem_transport=transport, symbols=SYMBOLS, **options)
    name = f"shmem_channel_{transport}_{'_'.join(options)}"
    assert build(source.code, name, "cuda", shmem=True, full_blocks=source.direct_stores).stat().st_size > 0


class _Host(SimpleNamespace):
    """The words of a channel as the runtime reads them, without a kernel."""

    def word(self, name):
        return self.values.get(name, 0)

    hang_word = word
    call_word = word

    def dropped(self):
        return 0


def _facts(**fields):
    facts = ChannelFacts(
        ring=4, debug_waits=2.0, waits={0: ("an Allreduce's wait", ""), 7: ("SignalWait on flags[1]", "j.py:40")}
    )
    facts.site("grid sync before map_x")
    for key, value in fields.items():
        setattr(facts, key, value)
    return facts


def test_a_wait_that_timed_out_is_reported_with_pe_flag_and_values():
    words = {"SITE": -1, "KIND": 3, "PE": 1, "BLOCK": 5, "WAIT": 7, "EXPECTED": 11, "VALUE": 10}
    error = hang_report(_Host(facts=_facts(), values=words, program="prog"))
    assert isinstance(error, KernelHang)
    text = str(error)
    for part in ("PE 1", "block 5", "SignalWait on flags[1] at j.py:40", "reach 11", "holds 10", "Fix:"):
        assert part in text, text
    assert error.source == "j.py:40" and error.block == 5


def _outcome(words, reason=None):
    call = Call.__new__(Call)
    call.host = _Host(facts=_facts(debug_waits=None), values=words, program="prog")
    call.interrupted, call.call_errors, call.errors, call._dropped, call.reason = False, [], [], 0, reason
    call._first_request = 0
    call.outcome()


def test_a_pe_stopped_by_a_peer_or_left_without_its_data_is_cancelled():
    with pytest.raises(KernelCancelled, match="by PE 0, which stopped at the grid sync before map_x"):
        _outcome({"STOPPED": 1, "PEER": 1})
    # it left a wait and ran on to its end: its results are not complete, so the call still raises
    with pytest.raises(KernelCancelled, match="by PE 2, which stopped at the wait for a peer's signal") as left:
        _outcome({"LEFT": 1, "PEER": 3})
    assert left.value.syncs is None and "grid sync" not in str(left.value)  # not known: not claimed
    with pytest.raises(KernelCancelled, match="by timeout at the wait"):
        _outcome({"LEFT": 1}, reason="timeout")
    _outcome({})  # nothing stopped: the call returns
