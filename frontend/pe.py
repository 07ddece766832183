"""``my_pe()`` and ``n_pes()``: the PE number and count, as two SDFG symbols.

They are free symbols of the program, hence arguments of the kernel and its launcher like any size
symbol; the runtime fills them from the initialised SHMEM library (``cpufree_shmem_my_pe``), so every
thread has them in a register and index arithmetic on them stays symbolic (no device memory, no sync).
"""

from __future__ import annotations

import dace

#: Symbol names; reserved (``__cpufree`` prefix), filled by the runtime, never by the user.
PE_SYMBOL = "__cpufree_pe"
N_PES_SYMBOL = "__cpufree_npes"
PE_SYMBOLS = (PE_SYMBOL, N_PES_SYMBOL)


def pe_symbol(sdfg: dace.SDFG, name: str):
    """Declares ``name`` on ``sdfg`` (once) and returns it as a symbolic value."""
    if name not in sdfg.symbols:
        sdfg.add_symbol(name, dace.int32)
    return dace.symbolic.symbol(name, dace.int32)


def uses_shmem(sdfg: dace.SDFG) -> bool:
    """Whether the program calls SHMEM (a node of this library, or the PE symbols)."""
    from .putmem import Putmem
    from .signal_wait import SignalWait

    if any(s in sdfg.free_symbols for s in PE_SYMBOLS):
        return True
    return any(isinstance(n, (Putmem, SignalWait)) for n, _ in sdfg.all_nodes_recursive())
