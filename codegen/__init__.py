"""Code generation of persistent cooperative kernels from DaCe SDFGs (CUDA and HIP)."""

from .cuda import CUDA
from .dialect import Dialect
from .hip import HIP
from .kernel import KernelSource, generate

DIALECTS = {"cuda": CUDA, "hip": HIP}

__all__ = ["CUDA", "HIP", "DIALECTS", "Dialect", "KernelSource", "generate"]
