// Package fuzz holds go test -fuzz targets for schedcache.Cache:
//
//   - FuzzOperations decodes the input into a sequence of pod and node
//     operations, applies each to a cache and to a sequential model of the
//     upstream semantics (docs/upstream-semantics.md sections
//     1, 3 and 6) and compares every observable after every step.
//   - FuzzMalformed decodes the input into malformed pods and nodes, feeds
//     them to every public method and checks that nothing panics or hangs,
//     that every error is typed, and that the aggregation invariants hold.
//
// Both run over their seed corpora (testdata/fuzz/<Name>/ and f.Add) as
// ordinary tests. Fuzz them with, e.g.,
//
//	go test ./tests/fuzz/ -run '^$' -fuzz '^FuzzOperations$' -fuzztime 10m
//	go test ./tests/fuzz/ -run '^$' -fuzz '^FuzzMalformed$' -fuzztime 10m
package fuzz
