"""Capability markers: GPU tests skip where there is no GPU; compile tests never skip in CI."""

import os
import shutil

import pytest

from dace_cpufree.runtime import find_nvcc, gpu_count

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
HIP_MISSING = "needs hipcc (Debian: apt-get install hipcc libamdhip64-dev rocm-device-libs)"
#: The AMD targets of the HIP compile tests: a CDNA GPU (64-lane wavefronts) and an RDNA GPU (32-lane ones).
os.environ.setdefault("DACE_CPUFREE_HIP_ARCH", "gfx90a,gfx1030")
os.environ.setdefault("DACE_CPUFREE_HIP_FLAGS", "-Werror")  # the generated code and our headers compile cleanly


def pytest_collection_modifyitems(config, items):
    gpus = gpu_count()
    for item in items:
        marked = {m.name for m in item.iter_markers()}  # markers only: keywords hold folder names too (tests/multigpu)
        if "gpu" in marked and gpus < 1:
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU"))
        if "multigpu" in marked and gpus < 2:
            item.add_marker(pytest.mark.skip(reason="needs two or more GPUs"))
        if "hip" in marked and shutil.which("hipcc") is None and not (IN_CI and shutil.which("apt-get")):
            # In CI hipcc must be there wherever apt-get could install it (.ci/run does): the test fails instead.
            item.add_marker(pytest.mark.skip(reason=HIP_MISSING))
        if "compile" in marked and find_nvcc() is None and not IN_CI:
            # In CI nvcc must be there: the test runs and fails instead of skipping.
            item.add_marker(pytest.mark.skip(reason="needs nvcc"))


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """A build cache of the run's own (never the user's): under pytest-xdist one for all workers of the run (their
    base folders share a parent), so a library that tests in two files build is compiled once; the builders lock
    their entries (and ``build`` renames finished ones into place), so workers may build at once."""
    if "DACE_CPUFREE_CACHE" in os.environ:
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):
        path = tmp_path_factory.getbasetemp().parent / "cpufree-cache"
        path.mkdir(exist_ok=True)
    else:
        path = tmp_path_factory.mktemp("cpufree-cache")
    os.environ["DACE_CPUFREE_CACHE"] = str(path)
