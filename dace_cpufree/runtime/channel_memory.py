"""The channel memory of one loaded library, seen from Python: the host-mapped words the kernel writes (progress,
notification records, host-callback requests, hang reports) and the cancel word the host writes. The layout comes from
the generator (:attr:`KernelSource.channel`), not from this module."""

from __future__ import annotations

import ctypes

import numpy as np

from dace_cpufree.errors import CpufreeError, LaunchError

from .host_calls import server
from .nvshmem import is_shmem_library


class ChannelHost:
    """The channel memory of one loaded library (allocated once by its launcher), seen from Python."""

    def __init__(self, lib, facts, program: str, callbacks: dict | None = None, step_sources: dict | None = None):
        self.facts = facts
        self.program = program
        self.step_sources = step_sources or {}
        lib.cpufree_channel_open.restype = ctypes.POINTER(ctypes.c_longlong)
        lib.cpufree_channel_dropped.restype = ctypes.c_ulonglong
        lib.cpufree_channel_cancel.argtypes = [ctypes.c_int]
        calls = getattr(facts, "calls", None) or []
        self.functions = []  # the Python callable of each host callback, by id
        if calls:
            lib.cpufree_channel_wait_call.restype = ctypes.c_longlong
            lib.cpufree_channel_wait_call.argtypes = [ctypes.c_longlong, ctypes.c_longlong]
            # the answer is a few stores: called without releasing the GIL (ctypes.PyDLL), which costs more
            self.answer = ctypes.PyDLL(lib._name).cpufree_channel_answer
            self.answer.restype, self.answer.argtypes = None, [ctypes.c_longlong, ctypes.c_longlong]
            missing = [c.name for c in calls if c.name not in (callbacks or {})]
            if missing:
                raise CpufreeError(
                    f"{program}: no Python function for the host callback(s) {', '.join(missing)}. Fix: compile the "
                    "@dace.program itself (its closure holds them)."
                )
            self.functions = [callbacks[c.name] for c in calls]
        # A program that communicates has one channel per PE (each process polls its own); its bar is PE 0's.
        self.pe = int(lib.cpufree_shmem_my_pe()) if is_shmem_library(lib) else 0
        pointer = lib.cpufree_channel_open()
        if not pointer:
            raise LaunchError(f"{program}: {lib.cpufree_error().decode()}")
        self._lib = lib
        self.words = np.ctypeslib.as_array(pointer, shape=(facts.words,))  # int64 view of the mapped memory
        self.values = self.words.view(np.float64)
        self._at = facts.index
        self.call_at = facts.call_index  # computed once: every request reads it
        # Host callbacks read and write single words on every request: ctypes arrays over the same memory index in
        # a fraction of the time a NumPy element access takes (the host's part of the round trip).
        address = ctypes.addressof(pointer.contents)
        self.ints = (ctypes.c_longlong * facts.words).from_address(address)
        self.floats = (ctypes.c_double * facts.words).from_address(address)
        self.servers = [server(self, call) for call in calls]

    def word(self, name: str) -> int:
        return int(self.words[self._at[name]])

    def call_word(self, name: str) -> int:
        return int(self.words[self.call_at[name]])

    def requested_call(self) -> int:
        """The callback number of the kernel's last request (from its flagged ``HEAD`` word)."""
        return self.call_word("HEAD") & 0xFFFF

    def hang_word(self, name: str) -> int:
        return int(self.words[self.facts.hang_index[name]])

    def site_text(self, site: int) -> str:
        """A cancel point by number, with the program line of the step after it where known."""
        if not 0 <= site < len(self.facts.sites):
            return f"cancel point {site}"
        source = self.site_source(site)
        return self.facts.sites[site] + (f" ({source})" if source else "")

    def site_source(self, site: int) -> str:
        """The program line of a cancel point's step ("": unknown)."""
        return self.facts.site_sources.get(site) or self.step_sources.get(self.facts.site_steps.get(site, ""), "")

    def set(self, name: str, value: int) -> None:
        self.words[self._at[name]] = value

    def cancel(self, value: int) -> None:
        """Asks the running kernel to stop (1), or clears the request before a launch (0): a word in device
        memory, copied there on a stream of its own while the kernel runs (the kernel never waits for host
        memory to see it)."""
        if self._lib.cpufree_channel_cancel(value) != 0:
            what = "asking the kernel to stop" if value else "clearing the kernel's stop request"
            raise LaunchError(f"{self.program}: {what} failed: {self._lib.cpufree_error().decode()}")

    def dropped(self) -> int:
        """Notifications dropped so far (exact: read from the device's counter)."""
        return int(self._lib.cpufree_channel_dropped())
