package controlplane_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache/e2e/controlplane"
)

// echoServer answers each line with the same line until the client
// closes; it stops at the test's end.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { _, _ = io.Copy(c, c); _ = c.Close() })
		}
	})
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, line string) (string, error) {
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := r.ReadString('\n')
	return got, err
}

// The proxy forwards, Sever resets open connections and keeps accepting,
// Cut refuses new connections until Restore, Close stops it.
func TestProxy(t *testing.T) {
	p, err := controlplane.NewProxy(echoServer(t))
	require.NoError(t, err)
	defer func() { _ = p.Close() }()

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c, bufio.NewReader(c)
	}
	c, r := dial()
	got, err := roundTrip(c, r, "one")
	require.NoError(t, err)
	require.Equal(t, "one\n", got)

	n, err := p.Sever()
	require.NoError(t, err)
	require.Equal(t, 2, n, "both sides of the one connection")
	_, err = roundTrip(c, r, "two")
	require.Error(t, err, "a severed connection still works")
	c, r = dial()
	got, err = roundTrip(c, r, "three")
	require.NoError(t, err)
	require.Equal(t, "three\n", got)

	require.NoError(t, p.Cut())
	require.NoError(t, p.Cut(), "cutting twice")
	_, err = roundTrip(c, r, "four")
	require.Error(t, err)
	_, err = net.Dial("tcp", p.Addr())
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "dial while cut: %v", err)

	require.NoError(t, p.Restore())
	c, r = dial()
	got, err = roundTrip(c, r, "five")
	require.NoError(t, err)
	require.Equal(t, "five\n", got)
	require.Equal(t, controlplane.ProxyStats{Accepted: 3, Severed: 4, Cuts: 1}, p.Stats())

	require.NoError(t, p.Close())
	require.ErrorIs(t, p.Close(), controlplane.ErrProxyClosed)
	require.ErrorIs(t, p.Restore(), controlplane.ErrProxyClosed)
	_, err = p.Sever()
	require.ErrorIs(t, err, controlplane.ErrProxyClosed)
}
