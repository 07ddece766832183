#!/bin/bash
# 4 H200s (session 6): A/B of the direct-store details at the default tiles (latency-bound): acquire vs relaxed
# poll, with and without the full-block bound, lean fences, and NVSHMEM's own calls (proxy). Every row validated.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-585}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc19 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(cat .gpu/COMMIT); $(left) s left"
declare -A TR=([p2p]=p2p [p2p_relaxed]=p2p [p2p_nobound]=p2p [p2p_lean]=p2p [proxy]=proxy)
declare -A FL=([p2p]="" [p2p_relaxed]="-DCPUFREE_P2P_RELAXED_POLL" [p2p_nobound]="-DCPUFREE_FULL_BLOCKS= -maxrregcount=255" [p2p_lean]="-DCPUFREE_P2P_LEAN_FENCES" [proxy]="")
VARIANTS="p2p p2p_relaxed p2p_nobound p2p_lean proxy"
for v in $VARIANTS; do
  DACE_CPUFREE_SHMEM_TRANSPORT=${TR[$v]} DACE_CPUFREE_NVCC_FLAGS="${FL[$v]}" timeout -s KILL 200 python3 - > /tmp/prebuild_$v.log 2>&1 <<'PY' &
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d"], [1, 4], ("weak",))) + list(s._configs(["jacobi_3d"], [1, 2], ("weak",)))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 12), flush=True)
PY
done
wait; for v in $VARIANTS; do echo "$v: $(tail -1 /tmp/prebuild_$v.log)"; done; echo "prebuilt, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --repeat 1 --timeout 40 --frameworks cpufree --modes weak --steps 100 --slope-steps 500"
for v in $VARIANTS; do
  mkdir -p $OUT/$v/2d $OUT/$v/3d
  export DACE_CPUFREE_SHMEM_TRANSPORT=${TR[$v]} DACE_CPUFREE_NVCC_FLAGS="${FL[$v]}"
  timeout -s KILL 60 $SC --out $OUT/$v/2d --programs jacobi_2d --gpus 1 4 > $OUT/$v/2d/scaling.log 2>&1
  timeout -s KILL 60 $SC --out $OUT/$v/3d --programs jacobi_3d --gpus 1 2 > $OUT/$v/3d/scaling.log 2>&1
  echo "$v done, $(left) s left"
done
for v in $VARIANTS; do for d in 2d 3d; do grep "^| cpufree" $OUT/$v/$d/multigpu_scaling.md 2>/dev/null | cut -d'|' -f4-9,14,17-20 | sed "s/^/$v /"; done; done
cd $OUT && tar czf variants.tgz $VARIANTS && rm -rf $VARIANTS
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
