#!/bin/bash
# 4 H200s (session 12): A/B in one call of the overlapped forms whose edge cells read the halo buffers directly
# (new: 3-D no unpacking, 2-D rows no unpacking) against the session-11 programs (old, .gpu/old/*.py, unpack
# after the waits), weak scaling 1 -> 4 GPUs at the large tiles, every row validated against NumPy; the
# step-timing GPU test; every PE's step-time table of the new jacobi_3d overlapped on 4 GPUs.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-540}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_REF_CACHE=/tmp/ref39 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS DACE_CPUFREE_STEP_TIMES
rm -rf /tmp/run /tmp/runold && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/
cp -r /tmp/run /tmp/runold && cp .gpu/old/jacobi_2d.py .gpu/old/jacobi_3d.py /tmp/runold/npbench_runs/multigpu/
cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -2 .gpu/COMMIT | tr '\n' ' '); $(left) s left"
cache() { case $1 in new) echo /tmp/cfc39new ;; old) echo /tmp/cfc39old ;; timed) echo /tmp/cfc39timed ;; esac; }
PIDS=""
for v in new old; do
  ( [ $v = old ] && cd /tmp/runold; export DACE_CPUFREE_CACHE=$(cache $v) PYTHONPATH=$PWD:/tmp/site
    timeout -k 10 200 python3 - > /tmp/prebuild_$v.log 2>&1 <<'PY'
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["overlapped"], 8), flush=True)
PY
  ) & PIDS="$PIDS $!"
done
( export DACE_CPUFREE_CACHE=$(cache timed) DACE_CPUFREE_STEP_TIMES=1 PYTHONPATH=/tmp/run:/tmp/site
  timeout -k 10 200 python3 - > /tmp/prebuild_timed.log 2>&1 <<'PY'
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_3d"], [4], ("weak",), {"jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["overlapped"], 2), flush=True)
PY
) & PIDS="$PIDS $!"
( export DACE_CPUFREE_CACHE=/tmp/cfc39test PYTHONPATH=/tmp/run:/tmp/site
  timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_step_times.py > $OUT/step_times_gpu_test.log 2>&1
  echo "step-times GPU test rc=$?: $(tail -1 $OUT/step_times_gpu_test.log)" ) & PIDS="$PIDS $!"
wait $PIDS; for v in new old timed; do echo "prebuild $v: $(tail -1 /tmp/prebuild_$v.log)"; done; echo "$(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --timeout 60 --frameworks cpufree --modes weak --gpus 1 4 --forms overlapped"
LARGE="--steps 10 --slope-steps 260 --size jacobi_2d=4098 jacobi_3d=258 --repeat 2"
show() { python3 - $1 $2 <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7], "eff", r["efficiency"][:5],
              "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"), r.get("stderr", "")[-300:])
PY
}
ab() {  # variant program round
  [ $(left) -lt 40 ] && { echo "skip $1 $2 $3: $(left) s left"; return; }
  local d=$OUT/$1_$2_$3; mkdir -p $d
  ( [ $1 = old ] && cd /tmp/runold; export DACE_CPUFREE_CACHE=$(cache $1) PYTHONPATH=$PWD:/tmp/site
    timeout -k 10 $(( $(left) - 5 )) $SC $LARGE --programs $2 --out $d > $d/scaling.log 2>&1 )
  show $d/multigpu_scaling.csv "$1 r$3"
}
for r in 1 2; do for p in jacobi_3d jacobi_2d; do ab new $p $r; ab old $p $r; done; done
if [ $(left) -gt 45 ]; then
  export DACE_CPUFREE_CACHE=$(cache timed) DACE_CPUFREE_STEP_TIMES=1 PYTHONPATH=/tmp/run:/tmp/site
  MPI="mpirun --allow-run-as-root --oversubscribe -x NVSHMEM_DISABLE_NVLS=1 -x PYTHONPATH -x DACE_CPUFREE_CACHE -x DACE_CPUFREE_REF_CACHE -x LD_LIBRARY_PATH -x DACE_CPUFREE_STEP_TIMES"
  timeout -k 5 40 $MPI -np 4 python3 -m npbench_runs.multigpu.run --steps 10 --slope-steps 260 --repeat 1 --step-times --program jacobi_3d --form overlapped --n 258 --nx 1026 > $OUT/step_times_jacobi_3d_overlapped_4.txt 2>&1
  echo "step times rc=$?"; grep -oE "us_per_step=[0-9.]+|valid=[A-Za-z]+|bitwise=[A-Za-z]+" $OUT/step_times_jacobi_3d_overlapped_4.txt | tr "\n" " "; grep -c "^\[pe" $OUT/step_times_jacobi_3d_overlapped_4.txt
fi
cd $OUT && tar czf runs.tgz new_* old_* && rm -rf new_* old_*
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
