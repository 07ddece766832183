"""Programs with block scopes (``@mapgridscope``)."""

import dace

from dace_cpufree import blocks, mapgridscope, nvshmem

N = dace.symbol("N")


@mapgridscope
def split_copy(A: dace.float64[N], B: dace.float64[N]):
    @blocks[0 : N // 3]
    def head():
        B[0 : N // 3] = A[0 : N // 3]

    @blocks[N // 3 : N]
    def tail():
        B[N // 3 : N] = 2.0 * A[N // 3 : N]


@dace.program
def copy_in_parts(A: dace.float64[N], B: dace.float64[N], C: dace.float64[N]):
    split_copy(A, B)
    C[1:] = B[:-1] + B[1:]  # reads what both block functions wrote: one grid sync after the scope


@mapgridscope
def smooth_in_parts(A: dace.float64[N], B: dace.float64[N], C: dace.float64[N]):
    @blocks[0 : N // 2]
    def first():
        B[0 : N // 2] = 2.0 * A[0 : N // 2]
        C[1 : N // 2] = B[0 : N // 2 - 1] + B[1 : N // 2]  # reads a neighbour's write: a barrier of this function

    @blocks[N // 2 : N]
    def second():
        B[N // 2 : N] = A[N // 2 : N]


@dace.program
def smooth_halves(A: dace.float64[N], B: dace.float64[N], C: dace.float64[N]):
    smooth_in_parts(A, B, C)


@mapgridscope
def relax_and_send(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[2], t: dace.int64):
    """One Jacobi step of a 1-D domain split over PEs in a ring, each with a halo cell at both ends: the first and
    last blocks compute the edge cells and send them; the rest of the grid computes the interior meanwhile."""

    def left():
        B[1] = (A[0] + A[1] + A[2]) / 3.0
        me, npes = nvshmem.my_pe(), nvshmem.n_pes()
        nvshmem.Putmem(B[N - 1 : N], B[1:2], (me + npes - 1) % npes, flags[1], t)

    def right():
        B[N - 2] = (A[N - 3] + A[N - 2] + A[N - 1]) / 3.0
        me, npes = nvshmem.my_pe(), nvshmem.n_pes()
        nvshmem.Putmem(B[0:1], B[N - 2 : N - 1], (me + 1) % npes, flags[0], t)

    def interior():
        B[2 : N - 2] = (A[1 : N - 3] + A[2 : N - 2] + A[3 : N - 1]) / 3.0


@dace.program
def jacobi_1d_overlapped(A: dace.float64[N], B: dace.float64[N], flags: dace.uint64[2], T: dace.int64):
    nvshmem.my_pe(), nvshmem.n_pes()  # the PE symbols, which the block functions use, declared in the program
    for t in range(1, T + 1):
        relax_and_send(A, B, flags, t)
        nvshmem.SignalWait(flags[0], t)
        nvshmem.SignalWait(flags[1], t)
        A[:] = B[:]


@mapgridscope
def relax(A: dace.float64[N], B: dace.float64[N]):
    """The same step on one GPU without communication: the edge cells on a block each, the interior on the rest."""

    def left():
        B[1] = (A[0] + A[1] + A[2]) / 3.0

    def right():
        B[N - 2] = (A[N - 3] + A[N - 2] + A[N - 1]) / 3.0

    def interior():
        B[2 : N - 2] = (A[1 : N - 3] + A[2 : N - 2] + A[3 : N - 1]) / 3.0


@dace.program
def jacobi_1d_periodic(A: dace.float64[N], B: dace.float64[N], T: dace.int64):
    for _ in range(T):
        relax(A, B)
        B[0] = B[N - 2]
        B[N - 1] = B[1]
        A[:] = B[:]


def jacobi_1d_reference(A, T):
    """NumPy: the periodic 1-D Jacobi step of :func:`jacobi_1d_periodic` (and of the overlapped form on one PE)."""
    A = A.copy()
    for _ in range(T):
        B = A.copy()
        B[1:-1] = (A[:-2] + A[1:-1] + A[2:]) / 3.0
        B[0], B[-1] = B[-2], B[1]
        A = B
    return A


# ---- misuse: each raises at compile time, naming the function and the fix ----


@mapgridscope
def overlapping(A: dace.float64[N], B: dace.float64[N]):
    @blocks[0 : N // 2 + 1]
    def first():
        B[0 : N // 2] = A[0 : N // 2]

    @blocks[N // 2 : N]
    def second():
        B[N // 2 : N] = A[N // 2 : N]


@mapgridscope
def outside(A: dace.float64[N], B: dace.float64[N]):
    @blocks[0 : N + 1]
    def everything():
        B[:] = A[:]

    @blocks[0:1]
    def nothing():
        A[0] = 1.0


@mapgridscope
def dependent(A: dace.float64[N], B: dace.float64[N], C: dace.float64[N]):
    def produce():
        B[:] = A[:] + 1.0

    def consume():
        C[:] = B[:] * 2.0


@dace.program
def call_overlapping(A: dace.float64[N], B: dace.float64[N]):
    overlapping(A, B)


@dace.program
def call_outside(A: dace.float64[N], B: dace.float64[N]):
    outside(A, B)


@dace.program
def call_dependent(A: dace.float64[N], B: dace.float64[N], C: dace.float64[N]):
    dependent(A, B, C)


@dace.program
def scope_in_a_map(A: dace.float64[N], B: dace.float64[N]):
    for _ in dace.map[0:2]:
        split_copy(A, B)


# ---- independent steps side by side (no grid function) ----


@dace.program
def periodic_rows(A: dace.float64[N, N], B: dace.float64[N, N], T: dace.int64):
    """A 2-D Jacobi step, then its two edge rows copied from the opposite interior rows: two small steps that do
    not depend on each other."""
    for _ in range(T):
        B[1:-1, 1:-1] = 0.25 * (A[:-2, 1:-1] + A[2:, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:])
        B[0, :] = B[N - 2, :]
        B[N - 1, :] = B[1, :]
        A[:] = B[:]


def periodic_rows_reference(A, B, T):
    A, B = A.copy(), B.copy()
    n = A.shape[0]
    for _ in range(T):
        B[1:-1, 1:-1] = 0.25 * (A[:-2, 1:-1] + A[2:, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:])
        B[0, :] = B[n - 2, :]
        B[n - 1, :] = B[1, :]
        A[:] = B
    return A, B
