"""Issue 3: gesummv (and others) at paper size: the step function as generated, inlined, and with __ldg reads."""
import copy, re, statistics as st, sys
import numpy as np, cupy as cp
import dace_cpufree
from dace_cpufree.runtime import build, PersistentProgram
from dace_cpufree.codegen import generate, CUDA
from npbench_runs.kernels import KERNELS

INLINE = """
namespace cpufree_diag {
template <unsigned int Size, typename F, typename... P> __device__ __forceinline__ void with_tile(long long want, F &&f, P... p) {
    if constexpr (Size > 32) {
        if (want >= (long long)Size && blockDim.x % Size == 0 && blockDim.x / Size <= 15) { f(cpufree::BlockTile<Size>{}, p...); return; }
        with_tile<Size / 2>(want, f, p...);
    } else { f(cg::tiled_partition<Size>(cg::this_thread_block()), p...); }
}
}
"""
def dev(args): return {k: cp.asarray(v) if hasattr(v, "shape") else v for k, v in args.items()}
for name in sys.argv[1:]:
    m = KERNELS[name]; args = m.initialize(**m.PRESETS["paper"])
    ref = copy.deepcopy(args); want = m.reference(**ref)
    sdfg = dace_cpufree.persistent_sdfg(m.program)
    src = generate(sdfg, CUDA); base = src.code
    ro = re.findall(r"double \* __restrict__ (\w+)", base.split("__global__")[1].split("{")[0])
    kernel_at = base.index("__global__")
    inl = base[:kernel_at] + INLINE + base[kernel_at:].replace("cpufree::with_tile<", "cpufree_diag::with_tile<")
    ldg = re.sub(r"= (" + "|".join(ro) + r")\[(.*)\];", r"= __ldg(&\1[\2]);", base) if ro else base
    vs = {"as generated": base, "steps inlined": inl, "__ldg reads": ldg,
          "inlined+__ldg": re.sub(r"= (" + "|".join(ro) + r")\[(.*)\];", r"= __ldg(&\1[\2]);", inl) if ro else inl}
    for vname, code in vs.items():
        try:
            lib = build(code, f"di_{name}_{vname.replace(' ', '').replace('+', '')}", "cuda")
        except Exception as e:
            print(name, vname, "BUILD FAILED", str(e)[-400:], flush=True); continue
        src.code = code
        p = PersistentProgram(sdfg, src, lib, "cuda")
        got = dev(copy.deepcopy(args)); r = p(**got)
        ok = all(np.allclose(cp.asnumpy(r if o == "__return" else got[o]), want if o == "__return" else ref[o],
                             rtol=m.RTOL, atol=m.ATOL) for o in m.OUTPUTS)
        ks = []
        for _ in range(6):
            g = dev(copy.deepcopy(args)); p(**g); ks.append(p.last_kernel_ms)
        print(f"{name} {vname:13s} launch={p.launch_config} valid={ok} kernel_ms={st.median(ks):.3f}", flush=True)
