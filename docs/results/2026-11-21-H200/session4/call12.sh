#!/bin/bash
# 4 H200s (session 4): gesummv step variants (GPU 0), multigpu tests, scaling of ours with direct stores (p2p)
# at the default sizes, then NVSHMEM's calls (proxy) for Jacobi 2-D weak; every configuration validated.
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
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(cat .gpu/COMMIT); $(left) s left"
CUDA_VISIBLE_DEVICES=0 timeout -s KILL 110 python3 .gpu/diag_inline.py gesummv covariance mvt softmax 2>&1 | grep -v -i warn
echo "diag done $(left) s left"
timeout -s KILL 200 python3 -m pytest -q -p no:cacheprovider -m "multigpu" tests/test_multigpu.py > "$OUT/multigpu_tests.log" 2>&1
echo "multigpu pytest rc=$? $(left) s left"; grep -v -i warn "$OUT/multigpu_tests.log" | tail -3
mkdir -p $OUT/p2p $OUT/proxy
DACE_CPUFREE_SHMEM_TRANSPORT=p2p timeout -s KILL $(( $(left) - 75 )) python3 -m npbench_runs.multigpu.scaling --out "$OUT/p2p" \
  --steps 100 --repeat 2 --timeout 40 --frameworks cpufree > "$OUT/p2p/scaling.log" 2>&1
echo "scaling p2p rc=$? $(left) s left"; cat "$OUT/p2p/multigpu_scaling.md" 2>/dev/null | head -40
DACE_CPUFREE_SHMEM_TRANSPORT=proxy timeout -s KILL $(( $(left) - 8 )) python3 -m npbench_runs.multigpu.scaling --out "$OUT/proxy" \
  --steps 100 --repeat 2 --timeout 30 --frameworks cpufree --programs jacobi_2d --modes weak > "$OUT/proxy/scaling.log" 2>&1
echo "scaling proxy rc=$? $(left) s left"; cat "$OUT/proxy/multigpu_scaling.md" 2>/dev/null | head -20
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
