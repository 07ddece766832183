"""rocSHMEM's public headers for the ROC_SHMEM compile tests: ``ROCSHMEM_HOME`` (an installation or a source tree),
else a git-ignored cache ``.cache/rocshmem`` that :func:`headers` fills from rocSHMEM's public repository (its
``include/`` only) where the network allows; ``None`` where neither is possible."""

import os
import shutil
import subprocess
from pathlib import Path

REPOSITORY = "https://github.com/ROCm/rocSHMEM"
CACHE = Path(__file__).resolve().parents[1] / ".cache" / "rocshmem"


def _has_headers(home: Path) -> bool:
    return (home / "include" / "rocshmem" / "rocshmem.hpp").is_file()


def headers() -> Path | None:
    """The folder whose ``include/`` holds ``rocshmem/rocshmem.hpp`` (and a ``rocshmem_config.h``), or ``None``."""
    home = Path(os.environ.get("ROCSHMEM_HOME", CACHE))
    if _has_headers(home) or "ROCSHMEM_HOME" in os.environ:
        return home if _has_headers(home) else None
    clone = CACHE.with_name("rocshmem-clone")
    shutil.rmtree(clone, ignore_errors=True)
    try:
        subprocess.run(
            ["git", "clone", "--depth", "1", "--filter=blob:none", "--sparse", REPOSITORY, str(clone)],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        subprocess.run(["git", "sparse-checkout", "set", "include"], cwd=clone, check=True, capture_output=True)
    except (OSError, subprocess.SubprocessError):
        shutil.rmtree(clone, ignore_errors=True)
        return None
    (CACHE / "include").mkdir(parents=True, exist_ok=True)
    shutil.copytree(clone / "include" / "rocshmem", CACHE / "include" / "rocshmem", dirs_exist_ok=True)
    shutil.rmtree(clone, ignore_errors=True)
    config = CACHE / "include" / "rocshmem" / "rocshmem_config.h"
    if not config.exists():  # made by rocSHMEM's CMake; the default build defines none of its switches
        config.write_text("// rocSHMEM's configuration header, default build (no switch defined)\n")
    return CACHE
