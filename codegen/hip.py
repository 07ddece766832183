"""The HIP dialect (AMD GPUs, hipcc)."""

from .dialect import Dialect

HIP = Dialect(name="hip", api="hip", suffix=".hip.cpp")
