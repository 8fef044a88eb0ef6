# presets.sh's markdown table: one row per run, from the {"preset",
# "result"} lines (each a loadgen JSON report).
def n: tostring | if test("^[0-9]{4,}$") then (. | explode | reverse | [range(0; length; 3) as $i | .[$i:$i+3]] | map(reverse | implode) | reverse | join(",")) else . end;
def ms: if . >= 1000 then "\(. / 1000 * 10 | round / 10) s" elif . >= 1 then "\(. * 10 | round / 10) ms" else "\(. * 1000 | round) µs" end;
"| preset | picker | bound | pods/s (virtual) | pods/s (wall) | pods per CPU s | scheduling latency p50 / p99 | attempt p50 / p99 | digest | notes |",
"|---|---|---|---|---|---|---|---|---|---|",
(.[] | .preset as $p | .result as $r | ($r.phases[] | select(.measured)) as $m
 | ($r.dataItems // [] | map(select(.labels.Metric == "PluginRejections")) | first | .data // {}) as $rej
 | ([$rej | to_entries[] | select(.value > 0) | "\(.key) rejected \(.value | round | n) nodes"] +
    (if ($m.preemptions // 0) > 0 then ["\($m.preemptions | n) preemptions, \($m.preemption_victims // 0 | n) victims"] else [] end)) as $notes
 | "| `\($p)` | \($r.picker) | \($m.scheduled | n)/\($m.pods | n) | \($m.throughput.pods_per_second | round | n) | \($m.throughput.wall_pods_per_second | round | n) | \($m.pods_per_cpu_second // 0 | round | n) | \($m.scheduling_latency_ms.perc50 | ms) / \($m.scheduling_latency_ms.perc99 | ms) | \($m.attempt_latency_ms.perc50 | ms) / \($m.attempt_latency_ms.perc99 | ms) | `\($r.digest[7:19])…` | \(if ($notes | length) > 0 then $notes | join("; ") else "–" end) |")
