"""Host runtime of dace-cpufree: building generated code and calling it."""

from .build import BACKENDS, build, cuda_arch, find_nvcc, gpu_count
from .program import PersistentProgram

__all__ = ["BACKENDS", "PersistentProgram", "build", "cuda_arch", "find_nvcc", "gpu_count"]
