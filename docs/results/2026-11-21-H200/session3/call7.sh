#!/bin/bash
# 4 H200s (session 3): multigpu tests (4 GPUs), then at once: GPU tests on GPU 0 and the scheduler's 8 NPBench kernels on GPU 1.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-585}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd); R=/tmp; ST=$R/npb; CACHE=$R/nbc; mkdir -p $ST
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc_mg LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}" DACE_CPUFREE_COMMIT=$(cat .gpu/COMMIT)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $DACE_CPUFREE_COMMIT; $(left) s left"
K8="softmax gesummv mvt atax bicg gemver mlp syr2k"; FW="numpy cupy dace_cpufree dace_cpufree_plain"; NB="python3 -m npbench_runs"
# builds of the NPBench kernels in the background while the multigpu tests run (CPU only)
( timeout -s KILL 300 nice -n 10 $NB run --preset S --kernels $K8 --frameworks $FW --compile-only --jobs 16 --cache $CACHE --progress plain > $ST/b.log 2>&1;
  timeout -s KILL 300 nice -n 10 $NB run --preset paper --kernels $K8 --frameworks $FW --compile-only --jobs 16 --cache $CACHE --progress plain > $ST/bp.log 2>&1 ) &
BUILD=$!
timeout -s KILL ${T_MG:-200} python3 -m pytest -q -p no:cacheprovider -m "multigpu" tests/test_multigpu.py > "$OUT/multigpu_tests.log" 2>&1
echo "multigpu pytest rc=$? $(left) s left"; grep -v -i warn "$OUT/multigpu_tests.log" | tail -4
( CUDA_VISIBLE_DEVICES=0 timeout -s KILL $(( $(left) - 15 )) python3 -m pytest -q -p no:cacheprovider -m "gpu" --durations=10 tests > "$OUT/gpu_tests.log" 2>&1; echo "gpu pytest rc=$?" > $OUT/gpu_rc.txt ) &
wait $BUILD; echo "builds done $(left) s left"
export CUDA_VISIBLE_DEVICES=1
timeout -s KILL 120 $NB run --preset S --kernels $K8 --frameworks $FW --db $ST/S8.db --jobs 8 --repeat 10 --budget 2 --timeout 60 --cache $CACHE --progress plain > $ST/tS.log 2>&1
echo "S rc=$? $(left) s left"; grep -E "^\[" $ST/tS.log | tail -32
timeout -s KILL $(( $(left) - 20 )) $NB run --preset paper --kernels $K8 --frameworks $FW --db $ST/P8.db --jobs 8 --repeat 10 --budget 3 --timeout 90 --cache $CACHE --progress plain > $ST/tP.log 2>&1
echo "paper rc=$? $(left) s left"; grep -E "^\[" $ST/tP.log | tail -32
wait; cat $OUT/gpu_rc.txt; grep -v -i warn "$OUT/gpu_tests.log" | tail -22
cp $ST/S8.db $ST/P8.db $OUT/ 2>/dev/null
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
