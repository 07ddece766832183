#!/bin/bash
# 4 H200s (session 12): weak scaling 1 -> 4 GPUs against the tile size, the committed programs (both forms):
# jacobi_3d tiles 258^3 (as before) and 386^3, jacobi_2d tiles 4098^2 (as before) and 8194^2; every row
# validated against NumPy on the global domain.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-570}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/run:/tmp/site NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc40 DACE_CPUFREE_REF_CACHE=/tmp/ref40 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS DACE_CPUFREE_STEP_TIMES
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -2 .gpu/COMMIT | tr '\n' ' '); $(left) s left"
timeout -k 10 200 python3 - > /tmp/prebuild.log 2>&1 <<'PY'
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 4], ("weak",), {"jacobi_2d": 8194, "jacobi_3d": 386}))
c += list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 16), flush=True)
PY
echo "prebuild: $(tail -1 /tmp/prebuild.log); $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --frameworks cpufree --modes weak --gpus 1 4 --forms overlapped plain"
show() { python3 - $1 <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(r["program"], r["form"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7], "eff", r["efficiency"][:5],
              "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"), r.get("stderr", "")[-300:])
PY
}
run() {  # name timeout size...
  local name=$1 to=$2; shift 2
  [ $(left) -lt 40 ] && { echo "skip $name: $(left) s left"; return; }
  mkdir -p $OUT/$name
  timeout -k 10 $(( $(left) - 5 )) $SC --timeout $to --steps 10 --slope-steps 110 --repeat 2 --size "$@" --out $OUT/$name > $OUT/$name/scaling.log 2>&1
  echo "$name rc=$? $(left) s left"; show $OUT/$name/multigpu_scaling.csv
}
run xl_3d 150 jacobi_3d=386 --programs jacobi_3d
run xl_2d 150 jacobi_2d=8194 --programs jacobi_2d
run large 60 jacobi_2d=4098 jacobi_3d=258
cd $OUT && tar czf runs.tgz xl_3d xl_2d large && rm -rf xl_3d xl_2d large
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
