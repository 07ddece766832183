#!/bin/bash
# 4 H200s (session 8), commit in .gpu/COMMIT (waits by every block; hidden puts 4 per thread; small steps
# staggered): weak scaling at the large tiles on 1, 2, 4 GPUs; the overlapped forms again with
# DACE_CPUFREE_STAGGER=0 (1 and 4 GPUs, A/B in one call); strong scaling of both stencils next to DaCe + MPI.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-540}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc27 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_STAGGER
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -1 .gpu/COMMIT); $(left) s left"
timeout -k 10 300 python3 -m npbench_runs.multigpu.dace_mpi jacobi_2d jacobi_3d > /tmp/dacebuild.log 2>&1 &
DB=$!
timeout -k 10 240 python3 - > /tmp/prebuild_base.log 2>&1 <<'PY' &
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 2, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
c += list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 2, 4], ("strong",)))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 44), flush=True)
PY
P1=$!
DACE_CPUFREE_STAGGER=0 timeout -k 10 240 python3 - > /tmp/prebuild_nostagger.log 2>&1 <<'PY' &
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["overlapped"], 8), flush=True)
PY
P2=$!
wait $P1 $P2; for v in base nostagger; do echo "$v: $(tail -1 /tmp/prebuild_$v.log)"; done; echo "prebuilt, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --timeout 60"
LARGE="--frameworks cpufree --modes weak --steps 10 --slope-steps 60 --size jacobi_2d=4098 jacobi_3d=258 --repeat 2"
mkdir -p $OUT/weak_large $OUT/weak_nostagger $OUT/strong
timeout -k 10 230 $SC $LARGE --gpus 1 2 4 --out $OUT/weak_large > $OUT/weak_large/scaling.log 2>&1
echo "weak large rc=$? $(left) s left"
DACE_CPUFREE_STAGGER=0 timeout -k 10 80 $SC $LARGE --gpus 1 4 --forms overlapped --out $OUT/weak_nostagger > $OUT/weak_nostagger/scaling.log 2>&1
echo "weak no stagger rc=$? $(left) s left"
wait $DB; echo "dace_mpi build rc=$? $(tail -1 /tmp/dacebuild.log); $(left) s left"
timeout -k 10 $(( $(left) - 25 )) $SC --frameworks cpufree dace_mpi --modes strong --steps 20 --slope-steps 100 --repeat 1 --gpus 1 2 4 --out $OUT/strong > $OUT/strong/scaling.log 2>&1
echo "strong rc=$? $(left) s left"
for d in weak_large weak_nostagger strong; do python3 - $OUT/$d/multigpu_scaling.csv $d <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(sys.argv[2], r["framework"][:7], r["program"], r["form"], r["transport"], r["launch"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7],
              "eff", r["efficiency"][:5], "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "vs dace", r["vs_dace_mpi"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(sys.argv[2], r["framework"][:7], r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"))
PY
done
cd $OUT && tar czf runs.tgz weak_large weak_nostagger strong && rm -rf weak_large weak_nostagger strong
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
