"""The benchmark suite's kernels as test parameters."""

import pytest

import dace_cpufree
from npbench_runs.kernels import KERNELS

# Kernels the compiler does not handle yet: expected to fail with exactly this error (strict, so the
# mark has to go as soon as they pass); each entry names the program and the error it stops at.
KNOWN_FAILURES: dict[str, str] = {}


def kernel_params():
    """sorted(KERNELS), the ones in KNOWN_FAILURES marked strict xfail (raising NotPersistableError)."""
    return [
        pytest.param(
            name,
            marks=pytest.mark.xfail(reason=KNOWN_FAILURES[name], raises=dace_cpufree.NotPersistableError, strict=True),
        )
        if name in KNOWN_FAILURES
        else name
        for name in sorted(KERNELS)
    ]
