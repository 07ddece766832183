"""Issue 3 diagnosis: mvt / gesummv at paper size, ours vs plain, with textual variants of the kernel."""
import copy, re, statistics as st, sys
import numpy as np, cupy as cp
import dace_cpufree
from dace_cpufree.runtime import build, PersistentProgram
from dace_cpufree.codegen import generate, CUDA
from npbench_runs.kernels import KERNELS

def dev(args): return {k: cp.asarray(v) if hasattr(v, "shape") else v for k, v in args.items()}

def segments(kernel):
    """Top-level segments of the kernel body: (label, text); grid syncs are their own segments."""
    head, body = kernel.split("const long long __nthreads = (long long)gridDim.x * blockDim.x;\n", 1)
    body, tail = body.rsplit("\n}", 1)
    segs, cur = [], None
    for line in body.split("\n"):
        if line.startswith("    // ") or line.strip() == "__grid.sync();" and not line.startswith("     "):
            cur = [line.strip(), [line]]
            segs.append(cur)
        elif cur is None:
            segs.append(["pre", [line]]); cur = segs[-1]
        else:
            cur[1].append(line)
    return head + "const long long __nthreads = (long long)gridDim.x * blockDim.x;\n", segs, "\n}" + tail

def variant(code, keep=None, subs=()):
    kernel, host = code.split("// ---- host launcher")
    head, segs, tail = segments(kernel)
    if keep is not None:
        segs = [s for i, s in enumerate(segs) if i in keep]
    kernel = head + "\n".join("\n".join(s[1]) for s in segs) + tail
    for a, b in subs:
        assert a in kernel, a
        kernel = kernel.replace(a, b)
    return kernel + "// ---- host launcher" + host

for name in sys.argv[1:] or ["mvt", "gesummv"]:
    m = KERNELS[name]; args = m.initialize(**m.PRESETS["paper"])
    ref = copy.deepcopy(args); want = m.reference(**ref)
    for sched in (True, False):
        sdfg = dace_cpufree.persistent_sdfg(m.program, scheduler=sched)
        src = generate(sdfg, CUDA)
        head, segs, tail = segments(src.code.split("// ---- host launcher")[0])
        tag = "ours " if sched else "plain"
        print(name, tag, "segments:", [(i, s[0][:60]) for i, s in enumerate(segs)], flush=True)
        vs = {"as is": variant(src.code)}
        if sched:
            vs["[&] capture"] = variant(src.code, subs=[("auto __step = [=](auto __tile)", "auto __step = [&](auto __tile)")])
            vs["warp inline"] = variant(src.code, subs=[(
                "cpufree::with_tile<1024>(", "__step(cg::tiled_partition<32>(cg::this_thread_block())); if (0) cpufree::with_tile<1024>(")])
        n = len(segs)
        for k in range(n):
            if segs[k][0].startswith("//"):
                vs[f"only seg {k}"] = variant(src.code, keep={k})
        for vname, code in vs.items():
            try:
                lib = build(code, f"diag_{name}_{'s' if sched else 'p'}_{abs(hash(vname)) % 10**8}", "cuda")
            except Exception as e:
                print(name, tag, vname, "BUILD FAILED", str(e)[:300], flush=True); continue
            src.code = code
            p = PersistentProgram(sdfg, src, lib, "cuda")
            got = dev(copy.deepcopy(args)); r = p(**got)
            ok = all(np.allclose(cp.asnumpy(r if o == "__return" else got[o]), want if o == "__return" else ref[o],
                                 rtol=m.RTOL, atol=m.ATOL) for o in m.OUTPUTS)
            ks = []
            for _ in range(6):
                g = dev(copy.deepcopy(args)); p(**g); ks.append(p.last_kernel_ms)
            print(f"{name} {tag} {vname:14s} launch={p.launch_config} valid={ok} kernel_ms={st.median(ks):.3f}", flush=True)
