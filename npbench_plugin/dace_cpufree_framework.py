"""NPBench framework class for dace-cpufree (installed by ``python -m npbench_runs.install_plugin``).

It compiles NPBench's own, unmodified ``<benchmark>_dace.py`` programs (the JSON's ``postfix``) with
``dace_cpufree.compile``: the whole program becomes one persistent cooperative kernel. The JSON's
``backend`` picks ``"cuda"`` (``dace_cpufree_gpu``: inputs are CuPy arrays, the device is
synchronised after every call) or ``"emulate"`` (``dace_cpufree_emulate``: the generated kernel
built for the host and run by one thread, NumPy arrays; for machines without a GPU).

Arguments are passed by keyword, with the benchmark's size parameters (``N=N``), as NPBench does
for DaCe. dace_cpufree is imported lazily: NPBench imports every framework module on start-up.
"""

import importlib
import traceback

import numpy as np
from npbench.infrastructure import Benchmark, Framework

__all__ = ["DaceCpufreeFramework"]


class DaceCpufreeFramework(Framework):
    """``dace_cpufree.compile(<benchmark>_dace.<func>, backend=...)`` as an NPBench framework."""

    def __init__(self, fname: str, save_strict: bool = False, load_strict: bool = False):
        # NPBench passes the strict-SDFG flags to every framework whose name starts with "dace";
        # they concern DaCe's own pipeline and are ignored here.
        super().__init__(fname)
        self.backend = self.info.get("backend") or ("cuda" if self.info.get("arch") == "gpu" else "emulate")

    @property
    def on_gpu(self) -> bool:
        return self.backend != "emulate"

    def version(self) -> str:
        import dace

        import dace_cpufree

        return f"{dace_cpufree.__version__}+dace{dace.__version__}"

    def imports(self):
        if not self.on_gpu:
            return {}
        import cupy

        return {"__npb_cf_sync": cupy.cuda.runtime.deviceSynchronize}

    def copy_func(self):
        if not self.on_gpu:
            return np.copy
        import cupy

        def to_device(array):
            out = cupy.asarray(array)
            cupy.cuda.runtime.deviceSynchronize()
            return out

        return to_device

    def copy_back_func(self):
        if not self.on_gpu:
            return lambda x: x
        import cupy

        return lambda x: cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else x

    def implementations(self, bench: Benchmark):
        import dace_cpufree

        path = bench.info["relative_path"].replace("/", ".")
        module_name = f"npbench.benchmarks.{path}.{bench.info['module_name']}_{self.info.get('postfix', 'dace')}"
        func_name = bench.info["func_name"]
        try:
            program = getattr(importlib.import_module(module_name), func_name)
            compiled = dace_cpufree.compile(program, backend=self.backend)
        except Exception as err:  # NPBench records nothing for a framework without implementations
            print(f"{self.info['full_name']}: could not compile {module_name}.{func_name}: {err}")
            traceback.print_exc(limit=3)
            return []
        return [(compiled, "persistent")]

    def params(self, bench: Benchmark):
        """Size parameters that are not arguments (passed as symbols): those every preset defines."""
        presets = list(bench.info["parameters"].values())
        common = set(presets[0]) if presets else set()
        for p in presets[1:]:
            common &= set(p)
        return [p for p in (presets[0] if presets else {}) if p in common and p not in bench.info["input_args"]]

    def arg_str(self, bench: Benchmark, impl=None) -> str:
        values = self.args(bench, impl)
        pairs = [f"{name}={value}" for name, value in zip(bench.info["input_args"], values)]
        pairs += [f"{p}={p}" for p in self.params(bench)]
        return ", ".join(pairs)

    def setup_str(self, bench: Benchmark, impl=None) -> str:
        setup = super().setup_str(bench, impl)
        return f"{setup}; __npb_cf_sync()" if self.on_gpu else setup

    def exec_str(self, bench: Benchmark, impl=None) -> str:
        call = f"__npb_result = __npb_impl({self.arg_str(bench, impl)})"
        return f"{call}; __npb_cf_sync()" if self.on_gpu else call
