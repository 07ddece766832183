"""The vendor dialect interface: what differs between CUDA and HIP in generated code.

Generated kernels use the CUDA spelling of the runtime API (``cudaMalloc``); a dialect renames it
(``hipMalloc``) and says which compiler builds it. Device-side differences (cooperative launch,
grid groups, atomics) live in ``runtime.cuh``, selected by the compiler's own macros.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The CUDA runtime names whose HIP counterpart is not the plain ``cuda`` -> ``hip`` rename.
HIP_NAMES = {
    "cudaDeviceProp": "hipDeviceProp_t",
    "cudaDevAttrMultiProcessorCount": "hipDeviceAttributeMultiprocessorCount",
}


@dataclass(frozen=True)
class Dialect:
    """A GPU programming dialect.

    :param name: ``"cuda"`` or ``"hip"``.
    :param api: prefix of the runtime API functions, types and enumerators.
    :param suffix: source file suffix.
    """

    name: str
    api: str
    suffix: str

    def translate(self, text: str) -> str:
        """Renames the CUDA runtime API in ``text`` to this dialect's."""
        if self.api == "cuda":
            return text
        if self.api == "hip":  # device attributes: cudaDevAttrX is hipDeviceAttributeX, except where HIP differs
            for cuda, hip in HIP_NAMES.items():
                text = re.sub(rf"\b{cuda}\b", hip, text)
            text = re.sub(r"\bcudaDevAttr(\w+)", r"hipDeviceAttribute\1", text)
        return re.sub(r"\bcuda([A-Z]\w*)", rf"{self.api}\1", text)
