"""CPU tests: nvcc compiles communicating programs and device-links them against NVSHMEM.

NVSHMEM comes from the ``nvidia-nvshmem-cu13`` wheel (the ``test`` extra). Marked ``compile``: they
run wherever nvcc is, and fail (never skip) in CI.
"""

import subprocess

import pytest
import shmem_programs as sp
from device_links import linked_registers
from kernel_copies import shmem_jacobi_2d

import dace_cpufree
from dace_cpufree.runtime import build


def _build(program, name, **options):
    source = dace_cpufree.kernel_source(program, **options)
    return build(source.code, name, "cuda", shmem=True, full_blocks=source.direct_stores)


@pytest.mark.compile
def test_a_communicating_kernel_with_a_product_is_built_once():
    """Relocatable device code (the SHMEM link) compiles the out-of-line device functions once, for the unbounded
    kernel's registers, and ptxas refuses them to a kernel bounded to three blocks per multiprocessor: a
    communicating kernel with products has one build, and it links."""
    source = dace_cpufree.kernel_source(sp.product_in_ring, shmem_transport="proxy")
    assert f"{source.kernel}_bounded" not in source.code
    library = build(source.code, "nvshmem_product", "cuda", shmem=True, environments=source.environments)
    assert library.stat().st_size > 0


def _symbols(library, defined=True):
    flag = "--defined-only" if defined else "--undefined-only"
    return subprocess.run(["nm", "-D", flag, str(library)], capture_output=True, text=True, check=True).stdout


@pytest.mark.compile
def test_device_link_against_nvshmem():
    library = _build(sp.strided, "nvshmem_strided")
    defined = _symbols(library)
    # the static device library's host side was linked in: NVSHMEM's device state lives in this library
    assert "nvshmemi_init_thread" in defined
    for entry in ("cpufree_shmem_init", "cpufree_shmem_finalize", "cpufree_shmem_get_uniqueid", "cpufree_run"):
        assert entry in defined
    needed = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    assert "libnvshmem_host.so" in needed and ("RUNPATH" in needed or "RPATH" in needed)


@pytest.mark.compile
@pytest.mark.parametrize("program", ["contiguous", "signalled_once", "concurrent"])
def test_each_expansion_choice_compiles(program):
    assert _build(getattr(sp, program), f"nvshmem_{program}").stat().st_size > 0


@pytest.mark.compile
def test_direct_stores_keep_nvshmem_transport_code_out_of_the_kernel(tmp_path):
    """NVSHMEM's puts, quiets, signals and waits carry its proxy transport, which the device link adds to the
    kernel's call graph (Jacobi 2-D on a 1 x 2 grid, sm_90: 76 registers linked, 42 from ptxas alone); the
    direct-store form does not call them (56 here)."""
    assert linked_registers(shmem_jacobi_2d.plain, "p2p", tmp_path) < linked_registers(
        shmem_jacobi_2d.plain, "proxy", tmp_path
    )


@pytest.mark.compile
def test_debug_wait_timeout_build(monkeypatch):
    monkeypatch.setenv("DACE_CPUFREE_WAIT_TIMEOUT_MS", "2000")
    source = dace_cpufree.kernel_source(sp.signalled_once)
    library = build(source.code, "nvshmem_debug_wait", "cuda", shmem=True, full_blocks=source.direct_stores)
    cu = library.parent / "nvshmem_debug_wait.cu"
    assert cu.exists() and library.stat().st_size > 0
