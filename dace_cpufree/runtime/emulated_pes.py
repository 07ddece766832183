"""Several PEs of a program that communicates, run on the host in one process: ``dace_cpufree.compile(prog,
backend="emulate", pes=P)`` and ``run.on_pes([kwargs_pe0, kwargs_pe1, ...])``.

Each PE loads a copy of the program's library of its own (its statics, launcher state and workspace are its own, as a
GPU's device memory is) and calls it in a thread of its own; the copies share the emulated symmetric heap, the PE
barrier, the reductions and the race checker (``cpufree/shmem_emulate.h``, ``cpufree/shmem_world.h``). A PE's
symmetric arguments are copied into its buffers on the emulated heap and back, as on GPUs. A wait that can never end
stops every PE and raises :class:`~dace_cpufree.errors.KernelHang` naming the PE, the flag and, with the race checker,
the program line; ``DACE_CPUFREE_EMULATE_TIMEOUT`` seconds is the longest any wait may last.
"""

from __future__ import annotations

import contextlib
import ctypes
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from dace_cpufree.errors import ArgumentError, CpufreeError, KernelHang, LaunchError
from dace_cpufree.options import RACE_ORDERS, env

from .nvshmem import declare_shmem_calls, symmetric_buffer
from .program import PersistentProgram


@contextlib.contextmanager
def library_copies(library: Path, count: int):
    """``count`` fresh copies of ``library``, one per PE, for the ``with`` block that loads them (a library loaded
    twice is loaded once, so each PE, and each program object, needs a file of its own; a loaded file may go). They
    lie beside the library, where libraries may be loaded from."""
    with tempfile.TemporaryDirectory(prefix="pes-", dir=library.parent) as folder:
        copies = [Path(folder) / f"{library.stem}.pe{k}.so" for k in range(count)]
        for path in copies:
            shutil.copyfile(library, path)
        yield copies


class EmulatedSession:
    """The SHMEM session of one emulated PE: what :class:`~.nvshmem.ShmemSession` is to a process on a GPU. Its
    symmetric buffers (one per argument, kept across calls) come from the emulated heap, allocated in the same order
    on every PE."""

    def __init__(self, lib, rank: int, size: int, uid: bytes):
        declare_shmem_calls(lib)
        lib.cpufree_emu_name.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        if lib.cpufree_shmem_init(uid, rank, size, 0) != 0:
            raise LaunchError(f"emulated PE {rank} of {size} could not join the others.")
        self.rank, self.size = rank, size
        self.buffers = {}  # argument name -> (pointer, nbytes)

    def buffer(self, lib, name: str, nbytes: int) -> int:
        ptr = symmetric_buffer(lib, self.buffers, name, nbytes)
        if ptr is None:
            raise LaunchError(f"PE {self.rank}: the emulated symmetric heap refused {nbytes} bytes for '{name}'.")
        return ptr

    def copy(self, lib, dst: int, src: int, nbytes: int) -> None:
        lib.cpufree_shmem_copy(ctypes.c_void_p(dst), ctypes.c_void_p(src), nbytes)

    def label(self, lib, pointer: int, name: str, itemsize: int) -> None:
        lib.cpufree_emu_name(ctypes.c_void_p(pointer), name.encode(), itemsize)


def _uid(lib) -> bytes:
    """PE 0's bootstrap id: the address of what the PEs share."""
    uid = ctypes.create_string_buffer(max(lib.cpufree_shmem_uniqueid_size(), 1))
    if lib.cpufree_shmem_get_uniqueid(uid) != 0:
        raise LaunchError("the emulated PEs could not be set up.")
    return uid.raw


def _text(lib, function: str) -> str:
    call = getattr(lib, function)
    call.restype = ctypes.c_char_p
    return call().decode()


def _line(step: str) -> str:
    """The program line at the end of a step's label (``"tasklet signal_wait (prog.py:39)"``), else the label."""
    found = re.search(r"\(([^()]*:\d+)\)$", step)
    return found.group(1) if found else step


def hang_error(program: str, text: str) -> KernelHang:
    """The :class:`KernelHang` of the emulated PEs' hang report: where a wait for a signal or a PE barrier could
    never end, its first line is ``pe, block, site, step`` (tabs) and the report follows."""
    head, _, body = text.partition("\n")
    fields = head.split("\t")
    if len(fields) == 4 and fields[0].isdigit():
        pe, block, site, step = fields
        where = f" at {_line(step)}" if step else ""
        summary = f"hang of the emulated PEs: PE {pe} waits forever at {site}{where}.\n{body.strip()}"
    else:
        pe, block, site, step, summary = "", "0", "a wait of the emulated PEs", "", text.strip()
    error = KernelHang(
        f"{program}: {summary}\nFix: every SignalWait needs a Putmem (or signal) to that flag from another PE with a "
        "signal value that reaches the one waited for, and every PE must reach each PE barrier and collective: check "
        "the target PE, the flag and the signal value of the matching Putmem, and the branches on my_pe() around them.",
        site,
        _line(step),
        int(block) if block.isdigit() else 0,
        None,
        None,
    )
    error.pe = int(pe) if pe.isdigit() else None
    return error


class EmulatedPes:
    """A program that communicates, compiled for ``pes`` PEs emulated on the host (see the module doc)."""

    def __init__(self, sdfg, source, library: Path, pes: int, callbacks: dict | None = None):
        if isinstance(pes, bool) or not isinstance(pes, int) or pes < 1:
            raise CpufreeError(f"pes={pes!r}. Fix: give the number of PEs to emulate, at least 1.")
        self.sdfg, self.source, self.library, self.pes = sdfg, source, library, pes
        self._callbacks = callbacks
        self._uid = None
        with library_copies(library, pes) as copies:
            self._programs = [
                PersistentProgram(sdfg, source, path, "emulate", callbacks=callbacks, attach=self._joiner(k))
                for k, path in enumerate(copies)
            ]
        self._first = self._programs[0]._lib
        self._first.cpufree_emu_reset.argtypes = [ctypes.c_double]
        self._calling = threading.Lock()

    def _joiner(self, rank: int):
        def attach(lib, source):
            if rank == 0:
                self._uid = _uid(lib)
            return EmulatedSession(lib, rank, self.pes, self._uid)

        return attach

    def with_pes(self, pes: int) -> EmulatedPes:
        """The same build on ``pes`` emulated PEs (the PE count is an argument of the library, not compiled in)."""
        return EmulatedPes(self.sdfg, self.source, self.library, pes, callbacks=self._callbacks)

    def __call__(self, *args, **kwargs):
        raise CpufreeError(
            f"{self.sdfg.name} was compiled for {self.pes} emulated PEs, which run together: a call of one is not "
            f"enough. Fix: run.on_pes([kwargs_pe0, ..., kwargs_pe{self.pes - 1}]) with one dict of arguments per PE."
        )

    def race_order(self, order: str, seed: int = 1) -> None:
        """The order in which the race checker runs the threads of all PEs from the next run on (see
        :meth:`PersistentProgram.race_order`)."""
        if order not in RACE_ORDERS:
            raise CpufreeError(f"race order {order!r}. Fix: use one of {', '.join(RACE_ORDERS)}.")
        self._programs[0].race_order(order, seed)

    def on_pes(self, calls) -> list:
        """Runs every PE at once, PE ``k`` with the arguments ``calls[k]`` (a dict, the keywords of a call of the
        program), and returns when all are done: each PE's arrays are updated in place; the list of the PEs' return
        values. Raises :class:`KernelHang` where a wait could never end, :class:`RaceError` with the race checker's
        report, or the first error of a PE."""
        calls = list(calls)
        if len(calls) != self.pes or not all(isinstance(c, Mapping) for c in calls):
            raise ArgumentError(
                f"{self.sdfg.name}: on_pes takes a list of {self.pes} dicts (one per PE), got "
                f"{len(calls)} item(s). Fix: run.on_pes([dict(...) for pe in range({self.pes})])."
            )
        with self._calling:
            return self._run(calls, float(env("DACE_CPUFREE_EMULATE_TIMEOUT")))

    def _run(self, calls: list, timeout: float) -> list:
        self._first.cpufree_emu_reset(timeout)
        results, errors, failed, lock = [None] * self.pes, [None] * self.pes, [], threading.Lock()

        def run(k: int) -> None:
            try:
                results[k] = self._programs[k](**calls[k])
            except BaseException as err:  # noqa: BLE001 - handed to the caller below
                errors[k] = err
                with lock:
                    failed.append(k)
                self._programs[k]._lib.cpufree_emu_abort()

        threads = [
            threading.Thread(target=run, args=(k,), name=f"cpufree-pe-{k}", daemon=True) for k in range(self.pes)
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + timeout + 30.0
        try:
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        except BaseException:  # Ctrl-C: the PEs' waits end, a kernel that computes runs on to its end
            self._first.cpufree_emu_abort()
            raise
        if any(thread.is_alive() for thread in threads):
            self._first.cpufree_emu_abort()
            raise KernelHang(
                f"{self.sdfg.name}: the emulated PEs did not finish within {timeout:g} s "
                "(DACE_CPUFREE_EMULATE_TIMEOUT): a PE runs without end, or waits where nothing could tell. Fix: look "
                "for a loop that never ends; with race_check=True a wait that can never end is reported at once.",
                "the run",
                "",
                0,
                None,
                None,
            )
        if failed:
            raise self._failure(errors[failed[0]])
        return results

    def _failure(self, first: BaseException) -> BaseException:
        """The error of a run where a PE failed: a call that cannot be done, a hang of the PEs, else the first PE's."""
        failure = _text(self._first, "cpufree_emu_failure")
        if failure:
            return LaunchError(f"{self.sdfg.name}: {failure}")
        hang = _text(self._first, "cpufree_emu_hang")
        if hang:
            return hang_error(self.sdfg.name, hang)
        return first
