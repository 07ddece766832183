#!/bin/bash
# 4 H200s (session 13): the multi-GPU test suite on the submitted code (pytest -m multigpu: both stencils, both
# forms, 2 and 4 GPUs against NumPy; symbolic sizes; HideWaits; the DaCe + MPI baseline on 2 GPUs).
set -u
T0=$(date +%s); T_CMD=${T_CMD:-540}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/run:/tmp/site NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc44 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}" DACE_CPUFREE_MULTIGPU_TIMEOUT=120
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS DACE_CPUFREE_STEP_TIMES
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -2 .gpu/COMMIT | tr '\n' ' '); $(left) s left"
timeout -k 10 $(( $(left) - 10 )) python3 -m pytest -v -p no:cacheprovider -m multigpu tests/test_multigpu.py tests/test_dace_mpi.py --durations=0 > $OUT/multigpu_tests.log 2>&1
echo "multigpu tests rc=$?"; grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed" $OUT/multigpu_tests.log | grep -v "^ *$" | tail -25
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | tee $OUT/console.log
