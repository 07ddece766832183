"""The CUDA dialect (NVIDIA GPUs, nvcc)."""

from .dialect import Dialect

CUDA = Dialect(name="cuda", api="cuda", suffix=".cu")
