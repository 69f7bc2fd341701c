#!/bin/bash
# How these files were made (5 Dec 2026, 09:06-09:16 UTC, the 2-core VM, load average 3.5-5.9).
# before: src/ of 1b7baea (the httptools client) by git archive; after: this tree. Alternated.
set -e
mkdir -p /tmp/client_base && git archive 1b7baea src | tar -x -C /tmp/client_base
run() {  # TAG ROUNDS LEVEL MODE
  for i in $(seq 1 "$2"); do for v in base new; do
    src=$([ $v = base ] && echo /tmp/client_base/src || echo src)
    PYTHONPATH=$src python benchmarks/bench_client_performance.py --no-basic $4 --per-chunk-levels "$3" \
      --repeats 2 --client-cpus 1 --server-cpus 0 --out "$OUT/$1-$v-$i.json"
  done; done
}
OUT=benchmarks/results/client_per_chunk_short_path
run run_A 3 256:256:20 --per-chunk    # 09:06-09:09
run run_B 2 512:128:20 --per-chunk    # 09:10-09:12
run run_C 2 256:256:20 --per-chunk    # 09:12-09:15
run python_P 3 256:256:20 --per-chunk-python  # 09:15-09:16
