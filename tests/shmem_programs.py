"""Small programs that communicate, one per expansion choice (see test_nvshmem_*.py)."""

import dace

from dace_cpufree import nvshmem

N, M = dace.symbol("N"), dace.symbol("M")


@dace.program
def contiguous(A: dace.float64[N, M], T: dace.int64):
    """A contiguous row, no signal; the source is rewritten every step (blocking put)."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for _ in range(T):
        A[1:-1, :] = A[1:-1, :] + 1.0
        nvshmem.Putmem(A[0, :], A[N - 2, :], (me + 1) % npes)


@dace.program
def signalled_once(A: dace.float64[N, M], B: dace.float64[M], flags: dace.uint64[2]):
    """A put with a signal whose source is never written again: non-blocking (_nbi)."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    nvshmem.Putmem(A[0, :], A[N - 2, :], (me + 1) % npes, flags[0], 1)
    nvshmem.SignalWait(flags[0], 1)
    B[:] = A[0, :] * 2.0


@dace.program
def strided(A: dace.float64[N, M], flags: dace.uint64[2], T: dace.int64):
    """A column (strided on both sides) with a signal."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        A[:, 1:-1] = A[:, 1:-1] * 0.5
        nvshmem.Putmem(A[:, 0], A[:, M - 2], (me + npes - 1) % npes, flags[1], t)
        nvshmem.SignalWait(flags[1], t)


@dace.program
def concurrent(A: dace.float64[N, M], flags: dace.uint64[4], T: dace.int64):
    """Four consecutive independent puts (two rows, two columns), then four waits."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        A[1:-1, 1:-1] = A[1:-1, 1:-1] + 1.0
        nvshmem.Putmem(A[0, 1:-1], A[N - 2, 1:-1], (me + 1) % npes, flags[0], t)
        nvshmem.Putmem(A[N - 1, 1:-1], A[1, 1:-1], (me + npes - 1) % npes, flags[1], t)
        nvshmem.Putmem(A[1:-1, 0], A[1:-1, M - 2], (me + 1) % npes, flags[2], t)
        nvshmem.Putmem(A[1:-1, M - 1], A[1:-1, 1], (me + npes - 1) % npes, flags[3], t)
        nvshmem.SignalWait(flags[0], t)
        nvshmem.SignalWait(flags[1], t)
        nvshmem.SignalWait(flags[2], t)
        nvshmem.SignalWait(flags[3], t)


@dace.program
def bad_shape(A: dace.float64[N, M]):
    nvshmem.Putmem(A[0, 1:], A[1, :], 1)


@dace.program
def bad_dtype(A: dace.float64[N, M], B: dace.float32[N, M]):
    nvshmem.Putmem(A[0, :], B[1, :], 1)


@dace.program
def bad_flag_dtype(A: dace.float64[N, M], flags: dace.int64[2]):
    nvshmem.Putmem(A[0, :], A[1, :], 1, flags[0], 1)


@dace.program
def bad_flag_scalar(A: dace.float64[N, M], flag: dace.uint64):
    nvshmem.SignalWait(flag, 1)


@dace.program
def wait_in_map(A: dace.float64[N], flags: dace.uint64[N]):
    for i in dace.map[0:N]:
        nvshmem.SignalWait(flags[i], 1)


@dace.program
def product_in_ring(A: dace.float64[N, M], B: dace.float64[M, M], C: dace.float64[N, M], T: dace.int64):
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for _ in range(T):
        C[:] = A @ B
        A[1:-1, :] = C[1:-1, :] + 1.0
        nvshmem.Putmem(A[0, :], A[N - 2, :], (me + 1) % npes)


# Programs for the emulation of several PEs (tests/runtime/test_multipe_emulate.py): two exchanges that the race
# checker must find unsafe, and waits that can never end.


@dace.program
def ring_without_flow_control(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[1], T: dace.int64):
    """A ring halo exchange with no flow control: PE me puts step t + 1's edge into its neighbour's halo A[0]
    after its own wait of step t, while the neighbour may still read step t's halo (nothing tells me when it did)."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    for t in range(1, T + 1):
        nvshmem.Putmem(A[0:1], A[N - 2 : N - 1], (me + 1) % npes, flags[0], t)
        nvshmem.SignalWait(flags[0], t)
        B[1:-1] = A[:-2] + A[2:]
        A[1:-1] = B[1:-1] * 0.5


@dace.program
def halo_read_before_wait(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[1]):
    """Reads the halo A[0] before the wait for the signal of the put that fills it."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    nvshmem.Putmem(A[0:1], A[N - 2 : N - 1], (me + 1) % npes, flags[0], 1)
    B[1:-1] = A[:-2] + A[2:]
    nvshmem.SignalWait(flags[0], 1)


@dace.program
def same_element_from_every_pe(A: dace.float64[N]):
    """Every PE puts into element 0 of PE 0's A, none ordered after another."""
    nvshmem.Putmem(A[0:1], A[1:2], 0)


@dace.program
def wait_never_signalled(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[1]):
    """Waits for the signal value 2 where the put signals 1."""
    me, npes = nvshmem.my_pe(), nvshmem.n_pes()
    nvshmem.Putmem(A[0:1], A[N - 2 : N - 1], (me + 1) % npes, flags[0], 1)
    nvshmem.SignalWait(flags[0], 2)
    B[:] = A[:] * 2.0
