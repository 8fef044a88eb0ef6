package actor

import (
	"bytes"
	"runtime"
	"strconv"
)

// goid returns the current goroutine's id, parsed from runtime.Stack. It is
// used only to recognise the notifier goroutine (Close or Submit called from
// inside the async error handler), never on a hot path.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return -1
	}
	return id
}
