# compare.sh's table: one row per run, from the {"run", "result"} lines.
# The anchor's result is bench/anchor's JSON (result.result); loadgen-fwk's
# is its JSON report, whose measured phase holds the figures.
map(
  if (.run | startswith("anchor/")) then
    .result.result as $r
    | {run: .run, pods: $r.bound, window: ($r.windowNs / 1e9), pps: $r.podsPerSecond,
       ppcpu: $r.podsPerCPUSecond, p50: ($r.attemptP50Ns / 1e6), p99: ($r.attemptP99Ns / 1e6), gcs: $r.numGC,
       victims: ($r.deleted // 0)}
  else
    (.result.phases[] | select(.measured)) as $m
    | {run: .run, pods: $m.scheduled, window: $m.wall_seconds, pps: $m.throughput.wall_pods_per_second,
       ppcpu: $m.pods_per_cpu_second, p50: $m.attempt_latency_ms.perc50, p99: $m.attempt_latency_ms.perc99, gcs: $m.gcs,
       victims: ($m.preemption_victims // 0)}
  end)
| (["run", "pods", "window_s", "pods_per_s", "pods_per_cpu_s", "attempt_p50_ms", "attempt_p99_ms", "gcs", "victims"] | @tsv),
  (.[] | [.run, .pods, ((.window * 10 | round) / 10), (.pps | round), (.ppcpu | round),
          ((.p50 * 1000 | round) / 1000), ((.p99 * 100 | round) / 100), .gcs, .victims] | @tsv)
