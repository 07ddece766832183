"""The host entry points of a program that communicates (NVSHMEM / ROC_SHMEM). NVSHMEM must be initialised by code
in the shared library that links libnvshmem_device.a (its device state lives there), hence here and not in Python.
"""

SHMEM_HEADER = "cpufree/shmem.cuh"  # SHMEM declarations, the collective launch, the symmetric workspace's hooks
SHMEM_HOST_TEMPLATE = """
// ---- SHMEM host entry points ----------------------------------------------------------------
#if defined(CPUFREE_SHMEM_ROC)
extern "C" int cpufree_shmem_uniqueid_size() {{ return 0; }}
extern "C" int cpufree_shmem_get_uniqueid(void *) {{ return 0; }}
// rocSHMEM bootstraps over MPI (MPI_COMM_WORLD): run under mpirun; the unique id is unused.
extern "C" int cpufree_shmem_init(const void *, int, int, int device) {{
    CPUFREE_CHECK(cudaSetDevice(device));
    rocshmem_init();
    return 0;
}}
extern "C" int cpufree_shmem_finalize() {{ rocshmem_finalize(); return 0; }}
extern "C" int cpufree_shmem_my_pe() {{ return rocshmem_my_pe(); }}
extern "C" int cpufree_shmem_n_pes() {{ return rocshmem_n_pes(); }}
extern "C" void *cpufree_shmem_malloc(size_t n) {{ return rocshmem_malloc(n ? n : 1); }}
extern "C" void cpufree_shmem_free(void *p) {{ rocshmem_free(p); }}
extern "C" int cpufree_shmem_barrier() {{ rocshmem_barrier_all(); return 0; }}
extern "C" int cpufree_shmem_unreachable_pe() {{ return -1; }}
#else
extern "C" int cpufree_shmem_uniqueid_size() {{ return (int)sizeof(nvshmemx_uniqueid_t); }}
extern "C" int cpufree_shmem_get_uniqueid(void *out) {{
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    if (nvshmemx_get_uniqueid(&id) != 0) return cpufree_fail("nvshmemx_get_uniqueid failed");
    memcpy(out, &id, sizeof(id));
    return 0;
}}
// Unique-id bootstrap: rank 0's id is handed to every process (the Python runtime broadcasts it with
// mpi4py). A second program in the same process initialises its own device state the same way.
extern "C" int cpufree_shmem_init(const void *uid, int rank, int nranks, int device) {{
    CPUFREE_CHECK(cudaSetDevice(device));
    nvshmemx_uniqueid_t id;
    memcpy(&id, uid, sizeof(id));
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    if (nvshmemx_set_attr_uniqueid_args(rank, nranks, &id, &attr) != 0)
        return cpufree_fail("nvshmemx_set_attr_uniqueid_args(rank %d of %d) failed", rank, nranks);
    if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0)
        return cpufree_fail("nvshmemx_init_attr failed on rank %d of %d", rank, nranks);
    return 0;
}}
extern "C" int cpufree_shmem_finalize() {{ nvshmem_finalize(); return 0; }}
extern "C" int cpufree_shmem_my_pe() {{ return nvshmem_my_pe(); }}
extern "C" int cpufree_shmem_n_pes() {{ return nvshmem_n_pes(); }}
extern "C" void *cpufree_shmem_malloc(size_t n) {{ return nvshmem_malloc(n ? n : 1); }}
extern "C" void cpufree_shmem_free(void *p) {{ nvshmem_free(p); }}
extern "C" int cpufree_shmem_barrier() {{ nvshmem_barrier_all(); return 0; }}
// The first PE that this one cannot reach by load/store (-1: every PE), for kernels built for direct
// stores (shmem_transport="p2p"). Collective: it allocates a symmetric probe.
extern "C" int cpufree_shmem_unreachable_pe() {{
    void *probe = nvshmem_malloc(8);
    int pe = 0;
    while (pe < nvshmem_n_pes() && nvshmem_ptr(probe, pe) != nullptr) ++pe;
    nvshmem_free(probe);
    return pe < nvshmem_n_pes() ? pe : -1;
}}
#endif
extern "C" int cpufree_shmem_copy(void *dst, const void *src, size_t n) {{
    CPUFREE_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDefault));
    return 0;
}}
"""
