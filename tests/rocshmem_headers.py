"""rocSHMEM's public headers for the ROC_SHMEM compile tests: ``ROCSHMEM_HOME`` (an installation or a source tree),
else a git-ignored cache ``.cache/rocshmem`` that :func:`headers` fills from rocSHMEM's public repository (its
``include/`` only) where the network allows; ``None`` where neither is possible."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from dace_cpufree.runtime.build import exclusive

REPOSITORY = "https://github.com/ROCm/rocSHMEM"
CACHE = Path(__file__).resolve().parents[1] / ".cache" / "rocshmem"


def _has_headers(home: Path) -> bool:
    return (home / "include" / "rocshmem" / "rocshmem.hpp").is_file()


def headers() -> Path | None:
    """The folder whose ``include/`` holds ``rocshmem/rocshmem.hpp`` (and a ``rocshmem_config.h``), or ``None``.
    Test processes that collect at once (pytest-xdist's workers) fetch it once: the first holds a lock while it
    clones, the others then find the cache."""
    home = Path(os.environ.get("ROCSHMEM_HOME", CACHE))
    if _has_headers(home) or "ROCSHMEM_HOME" in os.environ:
        return home if _has_headers(home) else None
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(CACHE.parent / "rocshmem.lock"):
        if not _has_headers(CACHE):
            _fetch()
    return CACHE if _has_headers(CACHE) else None


def _fetch() -> None:
    """rocSHMEM's ``include/rocshmem`` into the cache, from a sparse clone of its repository (nothing where the clone
    fails)."""
    with tempfile.TemporaryDirectory(dir=CACHE.parent) as folder:
        clone = Path(folder) / "rocshmem"
        try:
            subprocess.run(
                ["git", "clone", "--depth", "1", "--filter=blob:none", "--sparse", REPOSITORY, str(clone)],
                check=True, capture_output=True, timeout=30,
            )  # fmt: skip
            subprocess.run(["git", "sparse-checkout", "set", "include"], cwd=clone, check=True, capture_output=True)
        except (OSError, subprocess.SubprocessError):
            return
        (CACHE / "include").mkdir(parents=True, exist_ok=True)
        shutil.copytree(clone / "include" / "rocshmem", CACHE / "include" / "rocshmem", dirs_exist_ok=True)
    config = CACHE / "include" / "rocshmem" / "rocshmem_config.h"
    if not config.exists():  # made by rocSHMEM's CMake; the default build defines none of its switches
        config.write_text("// rocSHMEM's configuration header, default build (no switch defined)\n")
