#!/bin/bash
# 4 H200s (session 13): (1) jacobi_3d weak at 1026x130x130 slabs per GPU again, on another machine (call 42's
# headline); (2) jacobi_2d weak at 4098^2 and 12290^2 tiles, both forms (the plain form's efficiency against
# the tile size); (3) syr2k's GPU tests (its code changed in session 12 and has not run on a GPU since).
set -u
T0=$(date +%s); T_CMD=${T_CMD:-560}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/run:/tmp/site NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc43 DACE_CPUFREE_REF_CACHE=/tmp/ref43 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS DACE_CPUFREE_STEP_TIMES
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -2 .gpu/COMMIT | tr '\n' ' '); $(left) s left"
( export DACE_CPUFREE_CACHE=/tmp/cfc43test CUDA_VISIBLE_DEVICES=3
  timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k syr2k > $OUT/syr2k_gpu_tests.log 2>&1
  echo "syr2k GPU tests rc=$?: $(tail -1 $OUT/syr2k_gpu_tests.log)" ) & TEST=$!
timeout -k 10 200 python3 - > /tmp/prebuild.log 2>&1 <<'PY'
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_3d"], [1, 4], ("weak",), {"jacobi_3d": (1026, 130)}))
for side in (4098, 12290):
    c += list(s._configs(["jacobi_2d"], [1, 4], ("weak",), {"jacobi_2d": side}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 14), flush=True)
PY
echo "prebuild: $(tail -1 /tmp/prebuild.log); $(left) s left"
wait $TEST
SC="python3 -m npbench_runs.multigpu.scaling --frameworks cpufree --modes weak --gpus 1 4 --forms overlapped plain"
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
run() {  # name per-config-timeout steps slope-steps program size
  local name=$1 to=$2 st=$3 sl=$4 prog=$5; shift 5
  [ $(left) -lt 60 ] && { echo "skip $name: $(left) s left"; return; }
  mkdir -p $OUT/$name
  timeout -k 10 $(( $(left) - 5 )) $SC --timeout $to --steps $st --slope-steps $sl --repeat 2 --programs $prog --size "$@" --out $OUT/$name > $OUT/$name/scaling.log 2>&1
  echo "$name rc=$? $(left) s left"; show $OUT/$name/multigpu_scaling.csv
}
run planes128 60 10 260 jacobi_3d jacobi_3d=1026x130
run tiles4098 60 10 260 jacobi_2d jacobi_2d=4098
run tiles12290 150 2 40 jacobi_2d jacobi_2d=12290
cd $OUT && tar czf runs.tgz planes128 tiles* && rm -rf planes128 tiles*
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
