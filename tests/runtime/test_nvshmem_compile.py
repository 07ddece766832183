"""CPU tests: nvcc compiles communicating programs and device-links them against NVSHMEM.

NVSHMEM comes from the ``nvidia-nvshmem-cu13`` wheel (the ``test`` extra). Marked ``compile``: they
run wherever nvcc is, and fail (never skip) in CI.
"""

import subprocess

import pytest
import shmem_programs as sp

import dace_cpufree
from dace_cpufree.runtime import build
from npbench_runs.multigpu import FORMS, PROGRAMS


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
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", ["jacobi_2d", "jacobi_3d"])
def test_multigpu_stencils_compile(name, form):
    """With symbolic sizes, through NVSHMEM's calls. The direct stores of every stencil are built and device-linked
    below (test_direct_store_kernels_fit_full_blocks, sizes compiled in); jacobi_3d_grid's four builds are in
    tests/multigpu/test_jacobi_3d_grid.py."""
    program = getattr(PROGRAMS[name], form)
    assert _build(program, f"{name}_{form}_proxy", shmem_transport="proxy").stat().st_size > 0


_LINKED: dict = {}


def _linked_registers(program, transport: str, tmp_path, symbols=None) -> int:
    """Registers per thread of the kernel after the device link against libnvshmem_device.a (what the
    launch's occupancy sees; ptxas alone reports the kernel without NVSHMEM's functions). Remembered per program,
    transport and sizes: two tests ask for Jacobi 2-D's direct stores."""
    import re

    symbols = symbols or dict(LX=1026, LY=1026, PY=2)
    key = (program.name, transport, tuple(sorted(symbols.items())))
    if key in _LINKED:
        return _LINKED[key]

    from dace_cpufree.runtime.build import INCLUDE_DIR, find_nvcc, full_block_flags
    from dace_cpufree.runtime.shmem_build import nvshmem_home

    nvcc, home = find_nvcc(), nvshmem_home()
    cu, obj = tmp_path / f"{transport}.cu", tmp_path / f"{transport}.o"
    source = dace_cpufree.kernel_source(program, symbols=symbols, shmem_transport=transport)
    cu.write_text(source.code)
    inc = [f"-I{INCLUDE_DIR}", f"-I{home / 'include'}"]
    subprocess.run(
        [
            nvcc,
            "-O3",
            "-std=c++17",
            "-arch=sm_90",
            "-rdc=true",
            *full_block_flags(source.direct_stores),
            *inc,
            "-c",
            str(cu),
        ]
        + ["-o", str(obj)],
        check=True,
    )
    link = subprocess.run(
        [
            nvcc,
            "-arch=sm_90",
            "-dlink",
            str(obj),
            f"-L{home / 'lib'}",
            "-lnvshmem_device",
            "-o",
            str(tmp_path / "d.o"),
            "-Xnvlink",
            "-v",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(
        rf"Function properties for '\w*{source.kernel}\w*':\s*\S+ info\s*: used (\d+) registers",
        link.stdout + link.stderr,
    )
    _LINKED[key] = int(found.group(1))
    return _LINKED[key]


@pytest.mark.compile
def test_direct_stores_keep_nvshmem_transport_code_out_of_the_kernel(tmp_path):
    """NVSHMEM's puts, quiets, signals and waits carry its proxy transport, which the device link adds to the
    kernel's call graph (Jacobi 2-D on a 1 x 2 grid, sm_90: 76 registers linked, 42 from ptxas alone); the
    direct-store form does not call them (56 here)."""
    from npbench_runs.multigpu import jacobi_2d

    assert _linked_registers(jacobi_2d.plain, "p2p", tmp_path) < _linked_registers(jacobi_2d.plain, "proxy", tmp_path)


@pytest.mark.compile
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_direct_store_kernels_fit_full_blocks(name, form, tmp_path):
    """A direct-store kernel is declared CPUFREE_FULL_BLOCKS, so after the device link one block of 1024
    threads (sm_90's limit, the build's default without a GPU) fits in sm_90's 65536 registers per SM:
    64 per thread at most. Without the bound Jacobi 2-D overlapped linked at 66 and ran 512-thread blocks."""
    sizes = {
        "jacobi_2d": dict(LX=1026, LY=1026, PY=2),
        "jacobi_3d": dict(LX=130, N=258),
        "jacobi_3d_grid": dict(LX=130, LY=130, LZ=130, PY=2, PZ=2),
    }[name]
    registers = _linked_registers(getattr(PROGRAMS[name], form), "p2p", tmp_path, sizes)
    assert registers <= 65536 // 1024, registers


@pytest.mark.compile
def test_debug_wait_timeout_build(monkeypatch):
    monkeypatch.setenv("DACE_CPUFREE_WAIT_TIMEOUT_MS", "2000")
    source = dace_cpufree.kernel_source(sp.signalled_once)
    library = build(source.code, "nvshmem_debug_wait", "cuda", shmem=True, full_blocks=source.direct_stores)
    cu = library.parent / "nvshmem_debug_wait.cu"
    assert cu.exists() and library.stat().st_size > 0
