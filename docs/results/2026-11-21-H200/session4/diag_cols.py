"""Issue 3: column reductions' unrolling (1 = generated, 2, 4) and scheduler on/off, paper size, validated."""
import copy, statistics as st, sys
import numpy as np, cupy as cp
import dace_cpufree
from dace_cpufree.runtime import build, PersistentProgram
from dace_cpufree.codegen import generate, CUDA
from npbench_runs.kernels import KERNELS

def dev(args): return {k: cp.asarray(v) if hasattr(v, "shape") else v for k, v in args.items()}
for name in sys.argv[1:]:
    m = KERNELS[name]; args = m.initialize(**m.PRESETS["paper"])
    ref = copy.deepcopy(args); want = m.reference(**ref)
    for sched in (True, False):
        sdfg = dace_cpufree.persistent_sdfg(m.program, scheduler=sched)
        src = generate(sdfg, CUDA); base = src.code
        vs = {"as generated": base}
        if sched and "#pragma unroll 1" in base:
            for u in (2, 4):
                vs[f"unroll {u}"] = base.replace("#pragma unroll 1", f"#pragma unroll {u}")
        for vname, code in vs.items():
            lib = build(code, f"dc_{name}_{'s' if sched else 'p'}_{vname.replace(' ', '')}", "cuda")
            src.code = code
            p = PersistentProgram(sdfg, src, lib, "cuda")
            got = dev(copy.deepcopy(args)); r = p(**got)
            ok = all(np.allclose(cp.asnumpy(r if o == "__return" else got[o]), want if o == "__return" else ref[o],
                                 rtol=m.RTOL, atol=m.ATOL) for o in m.OUTPUTS)
            ks = []
            for _ in range(6):
                g = dev(copy.deepcopy(args)); p(**g); ks.append(p.last_kernel_ms)
            print(f"{name} {'ours ' if sched else 'plain'} {vname:13s} launch={p.launch_config} valid={ok} "
                  f"kernel_ms={st.median(ks):.3f}", flush=True)
