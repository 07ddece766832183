#!/bin/bash
# 4 H200s (session 13): ours (both forms) next to upstream DaCe + MPI (dace.comm, halos staged through the host)
# at the configurations where our overlapped form meets issue 4's targets: jacobi_3d 1026x130x130 slabs and
# jacobi_2d 4098^2 tiles per GPU, weak, 1 and 4 GPUs, every row validated after 10 steps.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-440}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/run:/tmp/site NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc45 DACE_CPUFREE_REF_CACHE=/tmp/ref45 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS DACE_CPUFREE_STEP_TIMES
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -2 .gpu/COMMIT | tr '\n' ' '); $(left) s left"
mkdir -p $OUT/vs_dace_mpi
timeout -k 10 $(( $(left) - 10 )) python3 -m npbench_runs.multigpu.scaling --frameworks cpufree dace_mpi --modes weak --gpus 1 4 \
  --forms overlapped plain --timeout 60 --steps 10 --slope-steps 260 --repeat 2 --prebuild-jobs 16 \
  --size jacobi_2d=4098 jacobi_3d=1026x130 --out $OUT/vs_dace_mpi > $OUT/vs_dace_mpi/scaling.log 2>&1
echo "scaling rc=$? $(left) s left"
python3 - $OUT/vs_dace_mpi/multigpu_scaling.csv <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(r["framework"], r["program"], r["form"], r["gpus"], r["local_shape"], "us/step", r["us_per_step"][:7],
              "eff", r["efficiency"][:5], "halo/ex", r["halo_us_per_exchange"][:6], "vs_dace_mpi", r["vs_dace_mpi"][:5],
              "valid", r["valid"], r["bitwise"])
    else:
        print(r["framework"], r["program"], r["form"], r["gpus"], "ERROR", r.get("error"), r.get("stderr", "")[-300:])
PY
tail -8 $OUT/vs_dace_mpi/multigpu_scaling.md
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
