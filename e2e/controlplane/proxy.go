package controlplane

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// ErrProxyClosed is returned by the Proxy's methods after Close.
var ErrProxyClosed = errors.New("controlplane: proxy closed")

// Proxy is a TCP proxy on a loopback port in front of the apiserver. A
// client whose config points at it (Config) can be cut off: Sever closes
// its open connections (its watches end, as when a network path breaks);
// Cut also closes the proxy's listening socket, so that the client's new
// connections are refused, as when the apiserver is unreachable, until
// Restore listens on the same address again. It forwards bytes only: TLS
// is end to end between the client and the apiserver.
//
// Its methods are safe for concurrent use.
type Proxy struct {
	addr    string // immutable: the proxy's host:port
	backend string // immutable: the apiserver's host:port

	mu     sync.Mutex
	ln     net.Listener          // guarded by mu; owned: nil while cut, closed by Cut and Close
	conns  map[net.Conn]struct{} // guarded by mu: open connections, both sides
	closed bool                  // guarded by mu
	stats  ProxyStats            // guarded by mu

	wg sync.WaitGroup // the accept loops and the two copy goroutines of each connection
}

// ProxyStats counts a Proxy's connections.
type ProxyStats struct {
	Accepted int // client connections forwarded
	Refused  int // client connections closed at once: the backend failed, or Cut raced with the accept
	Severed  int // connections (each side counts) closed by Sever or Cut
	Cuts     int // calls of Cut that found the proxy open
}

// NewProxy starts a Proxy to the control plane's apiserver, closed at the
// test's Cleanup (before the apiserver stops).
func (cp *ControlPlane) NewProxy() (*Proxy, error) {
	u, err := hostPort(cp.admin.Host)
	if err != nil {
		return nil, &OpError{Op: "NewProxy", Object: cp.admin.Host, Err: err}
	}
	p, err := NewProxy(u)
	if err != nil {
		return nil, err
	}
	cp.proxiesMu.Lock()
	cp.proxies = append(cp.proxies, p)
	cp.proxiesMu.Unlock()
	return p, nil
}

// MustNewProxy is NewProxy that fails tb on error.
func (cp *ControlPlane) MustNewProxy(tb testing.TB) *Proxy {
	tb.Helper()
	p, err := cp.NewProxy()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func (cp *ControlPlane) closeProxies() {
	cp.proxiesMu.Lock()
	ps := cp.proxies
	cp.proxies = nil
	cp.proxiesMu.Unlock()
	for _, p := range ps {
		_ = p.Close()
	}
}

// hostPort extracts host:port from a rest.Config Host ("https://h:p").
func hostPort(host string) (string, error) {
	u, err := url.Parse(host)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", fmt.Errorf("no host:port in %q", host)
	}
	return u.Host, nil
}

// NewProxy starts a proxy on a free loopback port that forwards each
// connection to backend (host:port). Close stops it.
func NewProxy(backend string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, &OpError{Op: "NewProxy", Object: backend, Err: err}
	}
	p := &Proxy{addr: ln.Addr().String(), ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop(ln)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Config returns a copy of base that reaches the apiserver through the
// proxy. TLS still verifies the apiserver (the server name is unchanged).
// The copy gets its own HTTP transport (client-go otherwise shares
// transports, and so connections, between configs with the same TLS
// settings), so severing this proxy's connections affects only clients
// made from it. A nil base gives a config with the proxy's address only
// (no credentials, no trust: requests fail TLS verification).
func (p *Proxy) Config(base *rest.Config) *rest.Config {
	if base == nil {
		base = &rest.Config{}
	}
	cfg := rest.CopyConfig(base)
	cfg.Host = "https://" + p.Addr()
	// A Proxy (even nil-returning) makes client-go's transport cache
	// build a fresh transport for this config instead of sharing one.
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	return cfg
}

func (p *Proxy) acceptLoop(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // the listener is closed
		}
		p.serve(c)
	}
}

// serve forwards c to the backend (or refuses it) and starts its copy
// goroutines.
func (p *Proxy) serve(c net.Conn) {
	b, err := net.Dial("tcp", p.backend)
	if err != nil {
		p.mu.Lock()
		p.stats.Refused++
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil || p.closed { // cut while dialling
		p.stats.Refused++
		p.mu.Unlock()
		_ = c.Close()
		_ = b.Close()
		return
	}
	p.conns[c] = struct{}{}
	p.conns[b] = struct{}{}
	p.stats.Accepted++
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pipe(b, c)
	go p.pipe(c, b)
}

// pipe copies from src to dst until either side fails, then closes both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Sever closes every open connection; new ones are still accepted
// (unless the proxy is cut). It returns how many connections (both sides
// counted) it closed.
func (p *Proxy) Sever() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrProxyClosed
	}
	return p.severLocked(), nil
}

func (p *Proxy) severLocked() int {
	n := len(p.conns)
	for c := range p.conns {
		_ = c.Close() // the copy goroutines see the error and return
		delete(p.conns, c)
	}
	p.stats.Severed += n
	return n
}

// Cut severs every open connection and closes the listening socket:
// the proxy's clients see their connections reset, and their new
// connections refused, until Restore. Cutting a cut proxy does nothing.
func (p *Proxy) Cut() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrProxyClosed
	}
	if p.ln == nil {
		return nil
	}
	err := p.ln.Close() // its accept loop returns
	p.ln = nil
	p.stats.Cuts++
	p.severLocked()
	if err != nil {
		return &OpError{Op: "Cut", Object: p.addr, Err: err}
	}
	return nil
}

// Restore listens on the proxy's address again after Cut. Another
// process may have bound the port meanwhile (unlikely on loopback): it
// retries for up to ten seconds, then returns an *OpError.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrProxyClosed
	}
	if p.ln != nil {
		return nil
	}
	var err error
	for i := 0; i < 100; i++ {
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.ln = ln
			p.wg.Add(1)
			go p.acceptLoop(ln)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &OpError{Op: "Restore", Object: p.addr, Err: err}
}

// Stats returns the connection counts so far.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops the proxy: the listener and every connection are closed
// and Close waits until its goroutines returned. Later calls return
// ErrProxyClosed.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrProxyClosed
	}
	p.closed = true
	var err error
	if p.ln != nil {
		err = p.ln.Close()
		p.ln = nil
	}
	p.severLocked()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
