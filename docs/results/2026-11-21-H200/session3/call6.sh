#!/bin/bash
# 4 H200s (session 3): scaling of ours and upstream DaCe + MPI at the default sizes, every configuration validated.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-585}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc_mg LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(cat /tmp/run/../run/.gpu/COMMIT 2>/dev/null); $(left) s left"
mkdir -p $OUT/default
timeout -s KILL $(( $(left) - ${T_AFTER:-150} )) python3 -m npbench_runs.multigpu.scaling --out "$OUT/default" --steps ${STEPS:-100} \
  --repeat 2 --timeout 60 ${SCALING_ARGS:-} > "$OUT/default/scaling.log" 2>&1
echo "scaling rc=$? $(left) s left"; cat "$OUT/default/multigpu_scaling.md" 2>/dev/null | head -60
grep -v '^{' "$OUT/default/scaling.log" | grep -v -i warn | tail -8
mkdir -p $OUT/weak_3d_256
timeout -s KILL $(( $(left) - 10 )) python3 -m npbench_runs.multigpu.scaling --out "$OUT/weak_3d_256" --steps ${STEPS:-100} \
  --repeat 2 --timeout 60 --frameworks cpufree --programs jacobi_3d --modes weak --size jacobi_3d=258 > "$OUT/weak_3d_256/scaling.log" 2>&1
echo "weak 3d 256 rc=$? $(left) s left"; cat "$OUT/weak_3d_256/multigpu_scaling.md" 2>/dev/null | head -10
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
