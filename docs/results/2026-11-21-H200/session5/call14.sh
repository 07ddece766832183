#!/bin/bash
# 4 H200s (session 5): the whole NPBench study (S and paper; NumPy, CuPy, upstream DaCe pure and cuBLAS, ours
# without and with the thread scheduler) as shards on the 4 GPUs of one host, then merged into one database
# per preset and reported; the GPU test suite on the 4th GPU. Every row validated against NumPy's reference.
#   GPU 0: paper, DaCe-Pure k3mm k2mm (86 s and 48 s per run)   GPU 1: paper, DaCe-Pure others, DaCe-cuBLAS
#   GPU 2: S, all 6 frameworks; then paper CuPy + ours          GPU 3: pytest -m gpu
# NumPy is not timed at paper size (minutes per kernel); its outputs are the references all rows are checked against.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-575}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd); ST=/tmp/npb; CACHE=/tmp/nbc; mkdir -p $ST
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc14 DACE_CPUFREE_COMMIT=$(cat .gpu/COMMIT)
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
NB="python3 -m npbench_runs"; ALLF="numpy cupy dace_pure dace_cublas dace_cpufree dace_cpufree_plain"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
echo "commit $DACE_CPUFREE_COMMIT; $(left) s left"
# builds (all frameworks, sizes symbolic: they serve both presets) + S references; paper references alongside
timeout -s KILL 300 nice -n 19 $NB run --preset paper --frameworks numpy --compile-only --jobs 16 --cache $CACHE --progress plain > $ST/refP.log 2>&1 &
REFP=$!
timeout -s KILL 240 $NB run --preset S --frameworks $ALLF --compile-only --jobs 40 --cache $CACHE --progress plain > $ST/build.log 2>&1
echo "builds rc=$? $(grep -c FAILED $ST/build.log) failed; $(left) s left"
CUDA_VISIBLE_DEVICES=0 timeout -s KILL $(( $(left) - 45 )) $NB run --preset paper --kernels k3mm k2mm --frameworks dace_pure \
  --db $ST/P0.db --jobs 1 --repeat 10 --budget 3 --timeout 300 --cache $CACHE --progress plain > $ST/tP0.log 2>&1 &
G0=$!
CUDA_VISIBLE_DEVICES=3 DACE_CPUFREE_CACHE=/tmp/cfc14t timeout -s KILL 330 python3 -m pytest -q -p no:cacheprovider -m gpu tests > $ST/gpu_tests.log 2>&1 &
G3=$!
( CUDA_VISIBLE_DEVICES=2 timeout -s KILL 260 $NB run --preset S --frameworks $ALLF --db $ST/S.db --jobs 1 --repeat 10 \
    --budget 3 --timeout 90 --cache $CACHE --progress plain > $ST/tS.log 2>&1; echo "S rc=$? at $(left) s left"
  while [ ! -f $ST/refs_done ]; do sleep 2; done
  CUDA_VISIBLE_DEVICES=2 timeout -s KILL $(( $(left) - 45 )) $NB run --preset paper --frameworks cupy dace_cpufree dace_cpufree_plain \
    --db $ST/P2.db --jobs 1 --repeat 10 --budget 3 --timeout 120 --cache $CACHE --progress plain > $ST/tP2.log 2>&1
  echo "paper (GPU 2) rc=$? at $(left) s left" ) &
G2=$!
wait $REFP; echo "paper references rc=$? $(grep -c FAILED $ST/refP.log) failed; $(left) s left"; touch $ST/refs_done
P1K=$(python3 -c "from npbench_runs.kernels import KERNELS; print(' '.join(k for k in KERNELS if k not in ('k3mm', 'k2mm')))")
( CUDA_VISIBLE_DEVICES=1 timeout -s KILL $(( $(left) - 45 )) $NB run --preset paper --kernels $P1K --frameworks dace_pure \
    --db $ST/P1.db --jobs 1 --repeat 10 --budget 3 --timeout 200 --cache $CACHE --progress plain > $ST/tP1.log 2>&1
  CUDA_VISIBLE_DEVICES=1 timeout -s KILL $(( $(left) - 45 )) $NB run --preset paper --frameworks dace_cublas \
    --db $ST/P1.db --jobs 1 --repeat 10 --budget 3 --timeout 200 --cache $CACHE --progress plain >> $ST/tP1.log 2>&1
  echo "paper (GPU 1) rc=$? at $(left) s left" ) &
G1=$!
wait $G3; echo "gpu pytest rc=$? $(left) s left"; tail -1 $ST/gpu_tests.log
wait $G0; echo "paper (GPU 0) rc=$? at $(left) s left"
wait $G1 $G2
$NB merge --db $OUT/results_paper.db $ST/P0.db $ST/P1.db $ST/P2.db
cp $ST/S.db $OUT/results_S.db
for P in S paper; do timeout -s KILL 60 $NB report --db $OUT/results_$P.db --preset $P --out $OUT > $ST/report_$P.log 2>&1 || tail -3 $ST/report_$P.log; done
grep -E "^\| \*\*geomean|^\| softmax" $OUT/report_S.md $OUT/report_paper.md
tar czf $OUT/logs.tgz -C /tmp npb/build.log npb/refP.log npb/tS.log npb/tP0.log npb/tP1.log npb/tP2.log npb/gpu_tests.log
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
