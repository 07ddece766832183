"""Programs the compiler's tests take as inputs: NPBench-shaped kernels (each module with ``program``, its NumPy
``reference``, ``PRESETS``, ``initialize``, ``OUTPUTS``, ``RTOL`` and ``ATOL``, the form ``helpers.check_against_numpy``
runs) and the distributed Jacobi stencils (``plain`` and ``overlapped`` forms, halos through ``nvshmem.Putmem`` and
``SignalWait``). The benchmark suite keeps its own versions: a change to a benchmark changes nothing here."""
