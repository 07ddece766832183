#!/bin/bash
# 4 H200s (session 10), commit in .gpu/COMMIT: A/B of HideWaits (the interior's last 1/K runs after the waits
# and the halo unpacking), weak scaling at the large tiles, 1 and 4 GPUs, every row validated against NumPy.
# All with the puts on the last blocks of their lanes (call 32's V1).
#   H0: DACE_CPUFREE_HIDE_WAITS=0 (off)   H8: default (1/8)   H4: 1/4
set -u
T0=$(date +%s); T_CMD=${T_CMD:-570}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc33 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -1 .gpu/COMMIT); $(left) s left"
variant() {
  case $1 in
    H0) export DACE_CPUFREE_HIDE_WAITS=0 ;;
    H8) unset DACE_CPUFREE_HIDE_WAITS ;;
    H4) export DACE_CPUFREE_HIDE_WAITS=4 ;;
  esac
}
for v in H0 H8 H4; do
  ( variant $v; timeout -k 10 200 python3 - > /tmp/prebuild_$v.log 2>&1 <<'PY'
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 20), flush=True)
PY
  ) &
done
wait; for v in H0 H8 H4; do echo "$v: $(tail -1 /tmp/prebuild_$v.log)"; done; echo "prebuilt, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --timeout 60 --frameworks cpufree --modes weak --gpus 1 4"
LARGE="--steps 10 --slope-steps 60 --size jacobi_2d=4098 jacobi_3d=258 --repeat 2"
show() { python3 - $1 $2 <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7], "eff", r["efficiency"][:5],
              "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"), r.get("stderr", "")[-300:])
PY
}
for pf in "jacobi_3d overlapped" "jacobi_3d plain" "jacobi_2d plain" "jacobi_2d overlapped" "jacobi_3d overlapped" "jacobi_3d plain"; do
  set -- $pf
  for v in H8 H0 H4; do
    if [ $(left) -lt 45 ]; then echo "skip $v $1 $2: $(left) s left"; continue; fi
    d=$OUT/$v/$1_$2; [ -d $d ] && d=${d}_again; mkdir -p $d
    ( variant $v; timeout -k 10 $(( $(left) - 10 )) $SC $LARGE --programs $1 --forms $2 --out $d > $d/scaling.log 2>&1 )
    show $d/multigpu_scaling.csv $v
  done
done
cd $OUT && tar czf runs.tgz H0 H8 H4 && rm -rf H0 H8 H4
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
