# compare.sh's gang check: per run, the gangs placed whole and partly and
# the pods bound (the anchor's result.result; loadgen-fwk's pod_groups),
# then "ok" when no run placed a gang partly and all placed as many gangs
# and bound as many pods, else "MISMATCH".
map(
  if (.run | startswith("anchor/")) then
    .result.result as $r | {run: .run, gangs: $r.gangs, whole: $r.gangsPlaced, partial: $r.gangsPartial, bound: $r.bound}
  else
    .result.pod_groups as $g | {run: .run, gangs: $g.groups, whole: $g.whole, partial: $g.partial, bound: $g.bound}
  end)
| (["run", "gangs", "whole", "partial", "pods_bound"] | @tsv),
  (.[] | [.run, .gangs, .whole, .partial, .bound] | @tsv),
  (if (all(.[]; .partial == 0) and ([.[].whole] | unique | length) == 1 and ([.[].bound] | unique | length) == 1)
   then "gang check: ok" else "gang check: MISMATCH" end)
