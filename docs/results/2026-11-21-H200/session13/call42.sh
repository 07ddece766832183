#!/bin/bash
# 4 H200s (session 13): jacobi_3d weak scaling 1 -> 2 -> 4 GPUs at the same work per GPU (256^3 cells) with
# halo planes of 64^2, 128^2 and 256^2 cells (slabs 4098x66x66, 1026x130x130, 258^3 per GPU): the halo cost
# per exchange against the plane's size; both forms, committed programs, every row validated after 10 steps.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-560}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/run:/tmp/site NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc42 DACE_CPUFREE_REF_CACHE=/tmp/ref42 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS DACE_CPUFREE_STEP_TIMES
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -2 .gpu/COMMIT | tr '\n' ' '); $(left) s left"
timeout -k 10 200 python3 - > /tmp/prebuild.log 2>&1 <<'PY'
from npbench_runs.multigpu import scaling as s
c = []
for tile in ((1026, 130), (4098, 66), 258):
    c += list(s._configs(["jacobi_3d"], [1, 2, 4], ("weak",), {"jacobi_3d": tile}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 16), flush=True)
PY
echo "prebuild: $(tail -1 /tmp/prebuild.log); $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --frameworks cpufree --modes weak --gpus 1 2 4 --programs jacobi_3d"
show() { python3 - $1 <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(r["program"], r["form"], r["gpus"], r["local_shape"], "us/step", r["us_per_step"][:7], "eff", r["efficiency"][:5],
              "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"), r.get("stderr", "")[-300:])
PY
}
run() {  # name size
  local name=$1; shift
  [ $(left) -lt 60 ] && { echo "skip $name: $(left) s left"; return; }
  mkdir -p $OUT/$name
  timeout -k 10 $(( $(left) - 5 )) $SC --timeout 60 --steps 10 --slope-steps 260 --repeat 2 --forms overlapped plain --size "$@" --out $OUT/$name > $OUT/$name/scaling.log 2>&1
  echo "$name rc=$? $(left) s left"; show $OUT/$name/multigpu_scaling.csv
}
run planes128 jacobi_3d=1026x130
run planes64 jacobi_3d=4098x66
run planes256 jacobi_3d=258
cd $OUT && tar czf runs.tgz planes* && rm -rf planes*
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
