# compare.sh's gang check: per run, the gangs placed whole and partly and
# the pods bound (the anchor's result.result; loadgen-fwk's pod_groups),
# then "ok" when every run placed every one of its gangs whole (none
# partly, none left out: on this workload every gang fits) and bound
# three pods a gang, else "MISMATCH". The runs' sizes may differ (each
# sized for a 10 s window); TestGangMatchesAnchor compares equal sizes.
map(
  if (.run | startswith("anchor/")) then
    .result.result as $r | {run: .run, gangs: $r.gangs, whole: $r.gangsPlaced, partial: $r.gangsPartial, bound: $r.bound}
  else
    .result.pod_groups as $g | {run: .run, gangs: $g.groups, whole: $g.whole, partial: $g.partial, bound: $g.bound}
  end)
| (["run", "gangs", "whole", "partial", "pods_bound"] | @tsv),
  (.[] | [.run, .gangs, .whole, .partial, .bound] | @tsv),
  (if all(.[]; .partial == 0 and .whole == .gangs and .bound == 3 * .gangs)
   then "gang check: ok" else "gang check: MISMATCH" end)
