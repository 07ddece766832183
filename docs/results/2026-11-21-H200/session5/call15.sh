#!/bin/bash
# 2 H200s (session 5): where a distributed Jacobi step's time goes. Kernels instrumented with clock64 at every
# grid sync and communication tasklet (.gpu/diag_phases.py), block 0 thread 0 of every PE; runs validated.
# The launcher now starts every PE's kernel behind an on-stream barrier (was: a host barrier).
set -u
T0=$(date +%s); T_CMD=${T_CMD:-560}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc15 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L; nvidia-smi topo -m | head -4; echo "commit $(cat .gpu/COMMIT); $(left) s left"
DG="python3 .gpu/diag_phases.py"
MPI="mpirun --allow-run-as-root --oversubscribe -x NVSHMEM_DISABLE_NVLS=1 -x PYTHONPATH -x DACE_CPUFREE_CACHE -x LD_LIBRARY_PATH"
for c in "jacobi_3d plain 130 130 1" "jacobi_3d plain 130 258 2" "jacobi_3d overlapped 130 130 1" "jacobi_3d overlapped 130 258 2" \
         "jacobi_2d plain 1026 0 1" "jacobi_2d plain 1026 0 2" "jacobi_2d overlapped 1026 0 1" "jacobi_2d overlapped 1026 0 2"; do
  set -- $c; DG_BUILD_ONLY=$5 timeout -s KILL 200 $DG $1 $2 $3 $4 10 > /tmp/b_$1_$2_$5.log 2>&1 &
done
wait; echo "builds done, $(left) s left"
run1() { CUDA_VISIBLE_DEVICES=$1 timeout -s KILL 120 $DG ${@:2} 2>&1 | grep -E "^DG|^RESULT|rror|Trap|trap"; }
run2() { timeout -s KILL 150 $MPI -np 2 $DG "$@" 2>&1 | grep -E "^DG|^RESULT|rror|Trap|trap"; }
run1 0 jacobi_3d plain 130 130 100 > /tmp/r1.log & run1 1 jacobi_2d plain 1026 0 500 > /tmp/r2.log & wait; cat /tmp/r1.log /tmp/r2.log
run1 0 jacobi_3d overlapped 130 130 100 > /tmp/r1.log & run1 1 jacobi_2d overlapped 1026 0 500 > /tmp/r2.log & wait; cat /tmp/r1.log /tmp/r2.log
echo "--- 2 PEs, $(left) s left"
run2 jacobi_3d plain 130 258 100
run2 jacobi_3d overlapped 130 258 100
run2 jacobi_2d plain 1026 0 500
run2 jacobi_2d plain 1026 0 100
run2 jacobi_2d overlapped 1026 0 500
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
