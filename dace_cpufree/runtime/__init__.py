"""Host runtime of dace-cpufree: building generated code and calling it."""

from .build import BACKENDS, build, cuda_arch, find_nvcc, gpu_count
from .program import PersistentProgram
from .step_times import StepTimes

__all__ = ["BACKENDS", "PersistentProgram", "StepTimes", "build", "cuda_arch", "find_nvcc", "gpu_count"]
