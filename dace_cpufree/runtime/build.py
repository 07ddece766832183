"""Building generated programs into shared libraries (nvcc, hipcc, or a host C++ compiler)."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from dace_cpufree.errors import BuildError
from dace_cpufree.options import RACE_ORDERS, env

from . import mathdx
from .hip_build import hipcc_command, hipcc_environment
from .shmem_build import shmem_flags

INCLUDE_DIR = Path(__file__).parent / "include"

#: Backends: the two GPU dialects and the single-thread host emulation used to test the generator.
BACKENDS = ("cuda", "hip", "emulate")


def cache_dir() -> Path:
    """The build cache: ``DACE_CPUFREE_CACHE``, else ``~/.cache/dace_cpufree``."""
    path = Path(env("DACE_CPUFREE_CACHE") or Path.home() / ".cache" / "dace_cpufree")
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def exclusive(lock: Path):
    """Holds an exclusive lock on the file ``lock`` (created if missing) for the ``with`` block: processes that
    build into one cache folder build each entry once."""
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def find_nvcc() -> str | None:
    for cand in (shutil.which("nvcc"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.exists(cand):
            return cand
    return None


@functools.lru_cache(maxsize=1)
def _driver():
    """The CUDA driver library, initialised; ``None`` when there is none or it does not initialise."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    return cuda if cuda.cuInit(0) == 0 else None


@functools.lru_cache(maxsize=1)
def gpu_count() -> int:
    """NVIDIA GPUs visible to this process, from the driver (0 when there is no driver)."""
    cuda, count = _driver(), ctypes.c_int(0)
    if cuda is None or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


#: A full block on every CUDA architecture from sm_50 to sm_120 (threads, registers per block): what a
#: build without a GPU assumes for the kernels declared CPUFREE_FULL_BLOCKS.
ARCHITECTURE_BLOCK_LIMITS = (1024, 65536)


def _gpu0_attributes(*attributes: int) -> tuple[int, ...] | None:
    """Values of the driver's device ``attributes`` (``CUdevice_attribute`` numbers) for GPU 0; ``None``
    without a GPU or when the driver does not answer."""
    cuda, device = _driver(), ctypes.c_int(0)
    if gpu_count() == 0 or cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return None
    values = []
    for attribute in attributes:
        value = ctypes.c_int(0)
        if cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, device) != 0:
            return None
        values.append(value.value)
    return tuple(values)


@functools.lru_cache(maxsize=1)
def full_block_limits() -> tuple[int, int]:
    """``(threads, registers)`` of the largest block on GPU 0, from the driver; without a GPU,
    :data:`ARCHITECTURE_BLOCK_LIMITS`."""
    # CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12
    return _gpu0_attributes(1, 12) or ARCHITECTURE_BLOCK_LIMITS


def full_block_flags(full_blocks: bool) -> list[str]:
    """nvcc flags of a program whose kernel is declared ``CPUFREE_FULL_BLOCKS`` (``codegen/kernel.py``): the
    block size for its launch bound, and a register cap for every device function of the file (the kernel's
    step functions are compiled apart from it, so its bound does not reach them)."""
    if not full_blocks:
        return []
    threads, registers = full_block_limits()
    return [f"-DCPUFREE_MAX_BLOCK_THREADS={threads}", f"-maxrregcount={registers // threads}"]


def extra_nvcc_flags() -> list[str]:
    """``DACE_CPUFREE_NVCC_FLAGS``: more nvcc flags (space-separated), after the generated ones, so a later
    ``-maxrregcount`` or ``-D`` wins (e.g. ``-DCPUFREE_WAIT_TIMEOUT_NS=...`` or an experiment's switch)."""
    return env("DACE_CPUFREE_NVCC_FLAGS").split()


def cuda_arch() -> str:
    """``DACE_CPUFREE_CUDA_ARCH`` if set; else the architecture of GPU 0 (``sm_<major><minor>``, named, so that
    the build cache tells GPUs apart); else sm_90."""
    chosen = env("DACE_CPUFREE_CUDA_ARCH")
    if chosen:
        return chosen
    capability = _compute_capability()
    return f"sm_{capability[0]}{capability[1]}" if capability else "sm_90"


@functools.lru_cache(maxsize=1)
def _compute_capability() -> tuple[int, int] | None:
    """``(major, minor)`` of GPU 0 from the driver; ``None`` without a GPU."""
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
    return _gpu0_attributes(75, 76)


def compile_command(backend: str, source: Path, output: Path, shmem: bool = False, flags: list[str] = ()) -> list[str]:
    """The command that compiles ``source`` into the shared library ``output``; ``shmem`` adds relocatable device
    code and the SHMEM library (:mod:`.shmem_build`), ``flags`` go in front of the source (CUDA and the emulation)."""
    inc = f"-I{INCLUDE_DIR}"
    extra, libs = shmem_flags(backend) if shmem else ([], [])
    if backend == "cuda":
        nvcc = find_nvcc()
        if nvcc is None:
            raise BuildError("nvcc was not found. Fix: install the CUDA toolkit or put nvcc on PATH.")
        link = ["--shared", "-Xcompiler", "-fPIC"]
        return [
            nvcc,
            "-O3",
            "-std=c++17",
            f"-arch={cuda_arch()}",
            "-lineinfo",
            inc,
            *flags,
            *extra,
            *link,
            str(source),
            "-o",
            str(output),
            *libs,
        ]
    if backend == "hip":
        return hipcc_command(inc, extra, ["-shared", "-fPIC"], str(source), str(output), libs)
    if backend == "emulate":
        cxx = os.environ.get("CXX", "g++")
        link = ["-shared", "-fPIC"]
        return [
            cxx,
            "-O1",
            "-std=c++17",
            "-x",
            "c++",
            "-DCPUFREE_EMULATE",
            inc,
            *flags,
            *extra,
            *link,
            str(source),
            "-o",
            str(output),
        ]
    raise BuildError(f"unknown backend '{backend}'. Fix: use one of {', '.join(BACKENDS)}.")


def race_check_flags(order: str) -> list[str]:
    """Flags of an emulation build with the race checker (``cpufree/racecheck.h``), ``order`` its default order
    (one of ``RACE_ORDERS``, in the order of racecheck.h's ``Order``)."""
    return ["-DCPUFREE_RACE_CHECK", f"-DCPUFREE_RACE_ORDER={RACE_ORDERS.index(order)}", "-pthread"]


def build(
    code: str,
    name: str,
    backend: str,
    shmem: bool = False,
    full_blocks: bool = False,
    race_check: str | None = None,
    environments: tuple = (),
    steps: tuple = (),
) -> Path:
    """Compiles ``code`` into a shared library (cached by content and command) and returns its path.

    :param shmem: the code calls NVSHMEM / ROC_SHMEM: relocatable device code, device-linked against it.
    :param full_blocks: the kernel is declared ``CPUFREE_FULL_BLOCKS`` (``KernelSource.direct_stores``).
    :param race_check: an emulation build with the race checker, threads run in this order (``RACE_ORDERS``).
    :param environments: the DaCe environments of the kernel's tasklets (``KernelSource.environments``): the
                         device library of matrix products adds its include folders (:mod:`.mathdx`).
    :param steps: ``(first line, last line, label)`` of the code's steps and loops (``KernelSource.step_lines``): a
                  compiler error names the innermost one around its line.
    """
    suffix = {"cuda": ".cu", "hip": ".hip.cpp", "emulate": ".cpp"}[backend]
    flags = full_block_flags(full_blocks) + extra_nvcc_flags() if backend == "cuda" else []
    if backend == "cuda" and mathdx.ENVIRONMENT in environments:
        flags = mathdx.nvcc_flags() + flags
    if race_check is not None:
        if backend != "emulate":
            raise BuildError(f"race checking runs in the host emulation, not on {backend}. Fix: backend='emulate'.")
        flags = race_check_flags(race_check)
    probe = compile_command(backend, Path("x"), Path("y"), shmem, flags)
    headers = "".join(p.read_text() for p in sorted(INCLUDE_DIR.glob("cpufree/*")))
    key = hashlib.sha256("\0".join([code, headers, *probe]).encode()).hexdigest()[:20]
    folder = cache_dir() / f"{name}-{backend}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"{name}{suffix}"
    output = folder / f"lib{name}.so"
    # One build per folder at a time: the processes of an MPI job compile the same program together.
    with exclusive(folder / ".lock"):
        if output.exists():
            return output
        source.write_text(code)
        cmd = compile_command(backend, source, output, shmem, flags)
        if backend == "emulate":
            precompiled = precompiled_runtime(cmd, source, output, headers)
            if precompiled is not None:  # searched before the headers themselves
                cmd.insert(cmd.index(f"-I{INCLUDE_DIR}"), f"-I{precompiled}")
        partial = output.with_name(output.name + ".part")
        cmd[cmd.index(str(output))] = str(partial)
        environ = hipcc_environment() if backend == "hip" else None
        proc = subprocess.run(cmd, capture_output=True, text=True, env=environ)
        if proc.returncode != 0:
            raise compiler_failure(cmd, name, source, proc.stderr, steps)
        os.replace(partial, output)
    return output


def precompiled_runtime(cmd: list[str], source: Path, output: Path, headers: str) -> Path | None:
    """A folder whose ``cpufree/runtime.cuh.gch`` is the runtime header (the first line of every generated program)
    precompiled by the host compiler with exactly the flags of the emulation build ``cmd``: parsing it is about half
    of each build. Made once per flag set and header text in the build cache; ``None`` where the compiler cannot
    (then the build parses the header). g++ checks a precompiled header against the build's flags and macros and
    parses the header itself where it does not match, so a stale or foreign one never changes a build."""
    flags = [a for a in cmd[1:] if a not in (str(source), str(output), "-o", "-shared", "-x", "c++")]
    key = hashlib.sha256("\0".join([cmd[0], headers, *flags]).encode()).hexdigest()[:20]
    folder = cache_dir() / f"precompiled-{key}"
    target = folder / "cpufree" / "runtime.cuh.gch"
    failed = folder / "failed"
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(folder / ".lock"):
        if not target.exists() and not failed.exists():
            partial = target.with_name(target.name + ".part")
            header = str(INCLUDE_DIR / "cpufree" / "runtime.cuh")
            proc = subprocess.run(
                [cmd[0], *flags, "-x", "c++-header", header, "-o", str(partial)], capture_output=True, text=True
            )
            if proc.returncode == 0:
                os.replace(partial, target)
            else:
                failed.write_text(proc.stderr[-2000:])
    return folder if target.exists() else None


_ERROR_LINE = re.compile(r"^(?P<file>[^:(\s][^:(]*?)(?:\((?P<l1>\d+)\)|:(?P<l2>\d+)(?::\d+)?):\s*(?:fatal )?error\b")


def first_error(stderr: str) -> tuple[str, int | None] | None:
    """The first error line of a compiler's output (nvcc/hipcc ``file(line): error``, g++/clang
    ``file:line:col: error``) and the line of the file it names, or ``None`` when no line says error."""
    for line in stderr.splitlines():
        m = _ERROR_LINE.match(line.strip())
        if m:
            return line.strip(), int(m.group("l1") or m.group("l2"))
    for line in stderr.splitlines():
        if "error" in line.lower():
            return line.strip(), None
    return None


def step_at(steps: tuple, line: int) -> str | None:
    """The label of the innermost of ``steps`` (``(first, last, label)``, ``KernelSource.step_lines``) that holds
    generated ``line``, ``None`` where none does."""
    around = [(last - first, label) for first, last, label in steps if first <= line <= last]
    return min(around)[1] if around else None


def compiler_failure(cmd: list[str], name: str, source: Path, stderr: str, steps: tuple = ()) -> BuildError:
    """The error of a failed build: the first error first (the later ones are often its consequences), the
    generated line it points at and the step (``steps``, see :func:`step_at`) that line belongs to, then the end of
    the output and the command."""
    found = first_error(stderr)
    lines = [f"{Path(cmd[0]).name} failed on the generated code of '{name}' ({source})."]
    error = step = None
    if found is not None:
        error, line = found
        lines.append(f"first error: {error}")
        code_lines = source.read_text().splitlines() if source.exists() else []
        if line is not None and 0 < line <= len(code_lines):
            lines.append(f"  generated line {line}: {code_lines[line - 1].strip()}")
            step = step_at(steps, line)
            if step:
                lines.append(f"  in the step: {step}")
    lines.append(
        "Fix: this construct is a code-generation gap of dace-cpufree; rewrite it with the supported NumPy subset "
        '(README.md, "What is supported, what is refused"), or report it with the program.'
    )
    lines.append(f"compiler output (last 4000 characters):\n{stderr[-4000:]}")
    lines.append(f"command: {' '.join(cmd)}")
    return BuildError("\n".join(lines), first_error=error, step=step)
