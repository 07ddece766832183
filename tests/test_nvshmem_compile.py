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


def _build(program, name):
    source = dace_cpufree.kernel_source(program)
    return build(source.code, name, "cuda", shmem=True)


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
    assert "libnvshmem_host.so" in needed and "RUNPATH" in needed or "RPATH" in needed


@pytest.mark.compile
@pytest.mark.parametrize("program", ["contiguous", "signalled_once", "concurrent"])
def test_each_expansion_choice_compiles(program):
    assert _build(getattr(sp, program), f"nvshmem_{program}").stat().st_size > 0


@pytest.mark.compile
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_multigpu_stencils_compile(name, form):
    assert _build(getattr(PROGRAMS[name], form), f"{name}_{form}").stat().st_size > 0


@pytest.mark.compile
def test_debug_wait_timeout_build(monkeypatch):
    monkeypatch.setenv("DACE_CPUFREE_WAIT_TIMEOUT_MS", "2000")
    source = dace_cpufree.kernel_source(sp.signalled_once)
    library = build(source.code, "nvshmem_debug_wait", "cuda", shmem=True)
    cu = library.parent / "nvshmem_debug_wait.cu"
    assert cu.exists() and library.stat().st_size > 0
