"""``my_pe()`` and ``n_pes()``: the PE number and count, as two SDFG symbols.

They are free symbols of the program, hence arguments of the kernel and its launcher like any size
symbol; the runtime fills them from the initialised SHMEM library (``cpufree_shmem_my_pe``), so every
thread has them in a register and index arithmetic on them stays symbolic (no device memory, no sync).
"""

from __future__ import annotations

import dace

from dace_cpufree.vocabulary import N_PES_SYMBOL, PE_SYMBOL, PE_SYMBOLS  # noqa: F401  (re-exported)


def pe_symbol(sdfg: dace.SDFG, name: str):
    """Declares ``name`` on ``sdfg`` (once) and returns it as a symbolic value."""
    if name not in sdfg.symbols:
        sdfg.add_symbol(name, dace.int32)
    return dace.symbolic.symbol(name, dace.int32)
