#!/bin/bash
# 4 H200s (session 7), commit in .gpu/COMMIT (spread direct-store puts): (1) how much the 4 GPUs differ: the
# 1-GPU large tiles on each GPU, all 4 at once; (2) weak large tiles again (1 and 4 GPUs); (3) weak scaling
# at the default (small, latency-bound) tiles, direct stores and NVSHMEM's calls side by side. Validated.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-450}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc23 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -1 .gpu/COMMIT); $(left) s left"
for tr in p2p proxy; do
  DACE_CPUFREE_SHMEM_TRANSPORT=$tr TR=$tr timeout -s KILL 200 python3 - > /tmp/prebuild_$tr.log 2>&1 <<'PY' &
import os
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d"], [1, 4], ("weak",))) + list(s._configs(["jacobi_3d"], [1, 2, 4], ("weak",)))
if os.environ["TR"] == "p2p":
    c += list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 30), flush=True)
PY
done
wait; for tr in p2p proxy; do echo "$tr: $(tail -1 /tmp/prebuild_$tr.log)"; done; echo "prebuilt, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --timeout 60 --frameworks cpufree --modes weak"
LARGE="--steps 10 --slope-steps 60 --size jacobi_2d=4098 jacobi_3d=258"
for g in 0 1 2 3; do
  mkdir -p $OUT/gpu$g
  CUDA_VISIBLE_DEVICES=$g timeout -s KILL 150 $SC --repeat 2 $LARGE --gpus 1 --out $OUT/gpu$g > $OUT/gpu$g/scaling.log 2>&1 &
done
sleep 20; nvidia-smi --query-gpu=index,utilization.gpu,clocks.sm,clocks.mem,power.draw --format=csv,noheader
wait; echo "per-GPU done, $(left) s left"
mkdir -p $OUT/weak_large
timeout -s KILL 160 $SC --repeat 2 $LARGE --gpus 1 4 --out $OUT/weak_large > $OUT/weak_large/scaling.log 2>&1
echo "weak large rc=$? $(left) s left"
SMALL="--steps 100 --slope-steps 500 --repeat 1"
for tr in p2p proxy; do
  mkdir -p $OUT/small_$tr
  DACE_CPUFREE_SHMEM_TRANSPORT=$tr timeout -s KILL $(( $(left) / 2 + 20 )) $SC $SMALL --gpus 1 2 4 --out $OUT/small_$tr > $OUT/small_$tr/scaling.log 2>&1
  echo "small $tr rc=$? $(left) s left"
done
for d in gpu0 gpu1 gpu2 gpu3 weak_large small_p2p small_proxy; do python3 - $OUT/$d/multigpu_scaling.csv $d <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(sys.argv[2], r["program"], r["form"], r["transport"], r["launch"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7],
              "eff", r["efficiency"][:5], "halo/ex", r["halo_us_per_exchange"][:6], "valid", r["valid"], r["bitwise"])
    else:
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"))
PY
done
cd $OUT && tar czf runs.tgz gpu0 gpu1 gpu2 gpu3 weak_large small_p2p small_proxy && rm -rf gpu0 gpu1 gpu2 gpu3 weak_large small_p2p small_proxy
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
