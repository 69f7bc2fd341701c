#!/bin/bash
# How these files were made: on the GPU machine's host (16 cores), the mock server on core 8 and
# the client on core 9, three clients alternated, each run by the benchmark script of its own
# revision (the script's imports follow the package's layout):
#   aiohttp    = src/ of 2e0559f (aiohttp's StreamReader, the client before the httptools protocol),
#                script of 02866d1 (its --per-chunk, the same measure: CPU over the burst / chunks)
#   httptools  = src/ and script of 1b7baea (the httptools protocol, before the short path)
#   this       = this tree (its script also reads each burst with a bare protocol: the floor)
# `bash run.sh --archives` (here, with git) writes them to .clients/; `SITE=DIR bash run.sh OUT_DIR` runs,
# with DIR holding the packages the host's Python lacks (httptools, pydantic), put on PYTHONPATH.
set -e
if [ "$1" = --archives ]; then
  mkdir -p .clients/scripts
  for rev in 2e0559f 1b7baea; do
    mkdir -p ".clients/$rev" && git archive "$rev" src | tar -x -C ".clients/$rev"
  done
  git show 02866d1:benchmarks/bench_client_performance.py > .clients/scripts/bcp_2e0559f_client.py
  git show 1b7baea:benchmarks/bench_client_performance.py > .clients/scripts/bcp_1b7baea_client.py
  exit 0
fi
OUT=$1; mkdir -p "$OUT"
client() {  # VARIANT -> "PYTHONPATH_SRC SCRIPT"
  case $1 in
    aiohttp) echo ".clients/2e0559f/src .clients/scripts/bcp_2e0559f_client.py";;
    httptools) echo ".clients/1b7baea/src .clients/scripts/bcp_1b7baea_client.py";;
    this) echo "src benchmarks/bench_client_performance.py";;
  esac
}
run() {  # TAG ROUNDS LEVEL MODE VARIANTS...
  tag=$1 rounds=$2 level=$3 mode=$4; shift 4
  for i in $(seq 1 "$rounds"); do for v in "$@"; do
    read -r src script <<< "$(client "$v")"
    PYTHONPATH=$src:$SITE python3 "$script" --no-basic $mode --per-chunk-levels "$level" --repeats 2 \
      --client-cpus 9 --server-cpus 8 --out "$OUT/$tag-$v-$i.json"
  done; done
}
{ date -u; nproc; cat /proc/loadavg; } > "$OUT/host_start.txt"
run run_A 3 256:256:20 --per-chunk aiohttp httptools this
run python_P 2 256:256:20 --per-chunk-python this
PYTHONPATH=src:$SITE python3 benchmarks/bench_client_performance.py --no-basic --scale \
  --scale-levels 2048:4:4 --server-cpus 0-7 --client-cpus 8-15 --out "$OUT/scale_2048_4proc.json"
{ date -u; cat /proc/loadavg; } > "$OUT/host_end.txt"
