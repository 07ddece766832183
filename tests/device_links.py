"""Registers per thread of a communicating kernel after the device link against NVSHMEM's device library."""

import re
import subprocess

import dace_cpufree

_LINKED: dict = {}


def linked_registers(program, transport: str, tmp_path, symbols=None) -> int:
    """Registers per thread of the kernel after the device link against libnvshmem_device.a (what the
    launch's occupancy sees; ptxas alone reports the kernel without NVSHMEM's functions). Remembered per program,
    transport and sizes: several tests ask for the same build."""
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
