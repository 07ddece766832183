"""Multi-GPU stencils with GPU-initiated communication (``nvshmem.Putmem``/``SignalWait``).

``jacobi_2d`` on a 2-D process grid (4 neighbours, east/west halos strided) and ``jacobi_3d`` split
along its first axis (2 neighbours, contiguous halo planes), each in a plain form (halos put straight
into the neighbours' halo rings) and an overlapped form (halo buffers, inner cells computed while the
halos travel, waits at the end of the step); ``jacobi_2d`` and ``jacobi_3d`` also as the single-GPU program that the
compiler distributes along the first axis (``distribute=``, the form "distributed"). ``run`` executes one under
``mpirun`` and checks it against NumPy on the global domain; ``scaling`` times them on 1, 2, 4 and 8 GPUs.
``jacobi_3d_grid`` is the 3-D stencil on a PX x PY x PZ process grid (6 neighbours; the faces across the two
trailing axes strided).
"""

from . import jacobi_2d, jacobi_3d, jacobi_3d_grid

PROGRAMS = {"jacobi_2d": jacobi_2d, "jacobi_3d": jacobi_3d, "jacobi_3d_grid": jacobi_3d_grid}
FORMS = ("plain", "overlapped")
#: the form of the programs that have a single-GPU version (``single``): it, distributed by the compiler
#: (``compile(single, distribute=...)``), each rank calling it with the global arrays
DISTRIBUTED = "distributed"
