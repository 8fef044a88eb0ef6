package actor

import (
	"bytes"
	"runtime"
	"strconv"
)

// goid returns the current goroutine's id, parsed from runtime.Stack.
//
// It stays because two public calls must behave differently when the
// async error handler makes them, and nothing but the goroutine tells
// them apart: Stop is a handshake that waits for the notifier goroutine,
// which cannot exit while it runs the handler that called Stop; and a
// Submit from the handler must not wait for the backlog the handler
// itself drains. The handler's signature (func(AsyncError)) carries no
// context or token that a call could present instead. It is kept cheap by
// being asked only while a handler runs (Coordinator.inHandler), so no
// caller pays for it otherwise, and it is never on a hot path.
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
