"""A single-GPU program split over PEs by ``compile(prog, distribute={...})``, called like the program itself: with
the global arrays, leaving the global result in them (see :mod:`dace_cpufree.decomposition`).

A call gives every PE its owned block of each split array with the halos around it (copied from the global array;
outside the global array, zeros that the program never reads), a copy of every other array and the scalars, zeroed
exchange flags and the sizes; it runs the PEs and copies each owned block back into the global array. Arrays that are
not split are computed alike on every PE (replicated); PE 0's copy is returned, and so is its return value.

- Emulated PEs (``backend="emulate", pes=P``): all PEs run in this process (:class:`~.emulated_pes.EmulatedPes`).
- GPUs: one PE per process of an ``mpirun`` job; every rank calls with the same global arrays and, after the call,
  holds the whole result (the owned blocks are gathered with ``mpi4py``'s ``allgather``; one process needs no MPI).
"""

from __future__ import annotations

import dace
import numpy as np

from dace_cpufree.decomposition import FLAGS_ARRAY, LOCAL_SYMBOL, decomposition_of
from dace_cpufree.errors import ArgumentError
from dace_cpufree.launcher import placement
from dace_cpufree.vocabulary import PE_SYMBOLS


def _module(x):
    """NumPy, or CuPy for a CuPy array."""
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy  # noqa: PLC0415 - only where CuPy arrays are passed

        return cupy
    return np


class DistributedProgram:
    """The program ``sdfg`` split over ``pes`` PEs (``None``: one per process of the launcher's job); ``inner`` runs
    them (emulated PEs) or this process's PE (a GPU)."""

    def __init__(self, sdfg, inner, pes: int | None):
        self.sdfg, self.decomposition, self._inner = sdfg, decomposition_of(sdfg), inner
        self._emulated = pes is not None
        self._arg_names = [a for a in sdfg.arg_names if a != FLAGS_ARRAY]
        self._flags = sdfg.arrays[FLAGS_ARRAY].shape[0] if FLAGS_ARRAY in sdfg.arrays else 0
        self.pes = pes if pes is not None else placement().size

    def describe(self, **symbols) -> str:
        """The decomposition as text (``dace-cpufree inspect --distribute``), with sizes where ``symbols`` give them."""
        return self.decomposition.describe(self.pes, symbols or None)

    def __call__(self, *args, **kwargs):
        if len(args) > len(self._arg_names):
            raise ArgumentError(f"{self.sdfg.name} takes {len(self._arg_names)} arguments, got {len(args)}.")
        given = dict(zip(self._arg_names, args))
        given.update(kwargs)
        symbols = self._symbols(given)
        extent = int(dace.symbolic.evaluate(dace.symbolic.pystr_to_symbolic(self.decomposition.extent), symbols))
        local = -(-extent // self.pes)
        need = max([1] + [max(s.lower, s.upper) for s in self.decomposition.splits])
        last = extent - (self.pes - 1) * local
        if last < need:
            raise ArgumentError(
                f"{self.sdfg.name}: {extent} elements along the split axis over {self.pes} PEs leave the last PE "
                f"{max(last, 0)}, fewer than the {need} its neighbour's halo needs. Fix: use fewer PEs or a larger "
                "domain."
            )
        named = {s.array: s for s in self.decomposition.splits if s.named}
        if self._emulated:
            calls = [self._pe_call(given, symbols, named, local, extent, p) for p in range(self.pes)]
            returned = self._inner.on_pes(calls)[0]
            results = calls
        else:
            rank = placement().rank
            call = self._pe_call(given, symbols, named, local, extent, rank)
            returned = self._inner(**call)
            results = self._gathered(call, named, rank)
        for name, value in given.items():
            if name in named:
                self._collect(value, [r[name] for r in results], named[name], local, extent)
            elif hasattr(value, "shape") and getattr(value, "ndim", 0) > 0:
                value[...] = _module(value).asarray(results[0][name])
        return returned

    def _symbols(self, given: dict) -> dict[str, int]:
        """The program's size symbols from the global arrays' shapes (and those given by name)."""
        out = {k: int(v) for k, v in given.items() if k in self.sdfg.symbols and not hasattr(v, "shape")}
        splits = {s.array: s for s in self.decomposition.splits}
        for name, value in given.items():
            desc = self.sdfg.arrays.get(name)
            if desc is None or not hasattr(value, "shape"):
                continue
            shape = list(desc.shape)
            if name in splits:
                shape[splits[name].axis] = dace.symbolic.pystr_to_symbolic(self.decomposition.extent)
            if len(shape) != len(value.shape):
                raise ArgumentError(
                    f"{self.sdfg.name}: '{name}' has {len(value.shape)} axes, the program's {len(shape)}. Fix: pass "
                    "the global array that the single-GPU program takes."
                )
            for dim, size in zip(shape, value.shape):
                if isinstance(dim, dace.symbolic.symbol) and str(dim) not in out:
                    out[str(dim)] = int(size)
        return out

    def _pe_call(self, given, symbols, named, local, extent, pe) -> dict:
        call = {}
        for name, value in given.items():
            split = named.get(name)
            if split is not None:
                call[name] = self._block(value, split, local, extent, pe)
            elif hasattr(value, "shape") and getattr(value, "ndim", 0) > 0:
                call[name] = value.copy()
            else:
                call[name] = value
        for name, size in symbols.items():
            if name not in call and name not in PE_SYMBOLS:
                call[name] = size
        call[LOCAL_SYMBOL] = local
        if self._flags:
            call[FLAGS_ARRAY] = np.zeros(self._flags, dtype=np.uint64)
        return call

    @staticmethod
    def _block(value, split, local, extent, pe):
        """PE ``pe``'s owned block of ``value`` with its halos (zeros outside the global array)."""
        xp = _module(value)
        shape = list(value.shape)
        shape[split.axis] = local + split.lower + split.upper
        out = xp.zeros(shape, dtype=value.dtype)
        first = pe * local - split.lower
        lo, hi = max(first, 0), min(first + shape[split.axis], extent)
        if hi > lo:
            src, dst = [slice(None)] * value.ndim, [slice(None)] * value.ndim
            src[split.axis], dst[split.axis] = slice(lo, hi), slice(lo - first, hi - first)
            out[tuple(dst)] = value[tuple(src)]
        return out

    def _collect(self, value, blocks, split, local, extent) -> None:
        """The owned parts of every PE's block written back into the global ``value``."""
        for pe, block in enumerate(blocks):
            lo, hi = pe * local, min((pe + 1) * local, extent)
            if hi <= lo:
                continue
            dst, src = [slice(None)] * value.ndim, [slice(None)] * value.ndim
            dst[split.axis], src[split.axis] = slice(lo, hi), slice(split.lower, split.lower + hi - lo)
            value[tuple(dst)] = _module(value).asarray(block[tuple(src)])

    def _gathered(self, call, named, rank) -> list[dict]:
        """Every rank's blocks of the split arrays (``mpi4py``'s allgather where several processes run)."""
        if self.pes == 1:
            return [call]
        from mpi4py import MPI  # noqa: PLC0415 - only multi-process runs need it

        mine = {n: (call[n].get() if hasattr(call[n], "get") else call[n]) for n in named}
        everyone = MPI.COMM_WORLD.allgather(mine)
        return [{**call, **theirs} if pe != rank else call for pe, theirs in enumerate(everyone)]
