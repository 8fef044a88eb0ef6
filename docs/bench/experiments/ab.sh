#!/bin/bash
# usage: [EXTRA='-bench.50k'] ab.sh binA binB pattern benchtime rounds field
A=$1; B=$2; PAT=$3; BT=$4; N=$5; FIELD=${6:-ns/op}
for i in $(seq $N); do
  for t in $A $B; do
    GOMAXPROCS=2 /tmp/$t -test.run '^$' -test.bench "$PAT" -test.benchtime $BT -test.count 1 $EXTRA 2>&1 | grep -E '^Benchmark' | awk -v t=$t -v f="$FIELD" '{for(i=1;i<=NF;i++) if ($i==f) print t, $1, $(i-1)}'
  done
done | sort | awk '{k=$1" "$2; v[k]=v[k]" "$3} END {for (k in v) print k, v[k]}' | while read t n vals; do
  med=$(echo $vals | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}')
  echo "$t $n median=$med [$vals]"
done
