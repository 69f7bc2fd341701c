#!/bin/bash
# alternating rounds: before (main 2e0559f), handwritten (wt-client 7b3e98e), httptools (wt-client-ht)
cd /work/wt/client
for round in 1 2; do
  for v in main handwritten ht; do
    echo "$(date -u +%H:%M:%S) round $round $v load: $(cut -d' ' -f1-3 /proc/loadavg)"
    PYTHONPATH=/tmp/ab/$v/src /work/main/.venv/bin/python benchmarks/bench_client_performance.py --no-basic --per-chunk --per-chunk-levels 256:256:20 --repeats 3 --client-cpus 1 --server-cpus 0 --out /tmp/ab/out/${v}_${round}.json > /tmp/ab/out/${v}_${round}.log 2>&1
    echo "  rc=$? $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
