package nodeinfo

import (
	v1 "k8s.io/api/core/v1"
)

// DefaultBindAllHostIP is the host IP a port with an empty hostIP is stored
// under (upstream fwk.DefaultBindAllHostIP).
const DefaultBindAllHostIP = "0.0.0.0"

// HostPort is a plain comparable value, safe to copy and share: one
// normalised host port of a pod (semantics 4.6), with an empty IP stored as
// "0.0.0.0" and an empty protocol as TCP.
type HostPort struct {
	IP       string
	Protocol v1.Protocol
	Port     int32
}

// NewHostPort returns the normalised HostPort for (ip, protocol, port).
func NewHostPort(ip string, protocol string, port int32) HostPort {
	if ip == "" {
		ip = DefaultBindAllHostIP
	}
	if protocol == "" {
		protocol = string(v1.ProtocolTCP)
	}
	return HostPort{IP: ip, Protocol: v1.Protocol(protocol), Port: port}
}

// ProtocolPort is a plain comparable value: a protocol and port pair
// (upstream fwk.ProtocolPort).
type ProtocolPort struct {
	Protocol string
	Port     int32
}

// HostPortInfo is a plain map owned by whoever made it: not safe for
// concurrent mutation, never blocks (NodeInfo.UsedPorts returns a fresh one
// per call). It maps a host IP to its set of used protocol/port pairs, the
// same shape as upstream fwk.HostPortInfo.
type HostPortInfo map[string]map[ProtocolPort]struct{}

// Add inserts (ip, protocol, port) after normalisation; port <= 0 is ignored.
func (h HostPortInfo) Add(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	hp := NewHostPort(ip, protocol, port)
	m, ok := h[hp.IP]
	if !ok {
		m = make(map[ProtocolPort]struct{}, 1)
		h[hp.IP] = m
	}
	m[ProtocolPort{Protocol: string(hp.Protocol), Port: port}] = struct{}{}
}

// Remove deletes (ip, protocol, port) after normalisation and drops an IP
// whose set empties; port <= 0 is ignored.
func (h HostPortInfo) Remove(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	hp := NewHostPort(ip, protocol, port)
	if m, ok := h[hp.IP]; ok {
		delete(m, ProtocolPort{Protocol: string(hp.Protocol), Port: port})
		if len(m) == 0 {
			delete(h, hp.IP)
		}
	}
}

// Len returns the number of (ip, protocol, port) triples.
func (h HostPortInfo) Len() int {
	n := 0
	for _, m := range h {
		n += len(m)
	}
	return n
}

// CheckConflict reports whether (ip, protocol, port) conflicts with h, as
// upstream: 0.0.0.0 conflicts with the pair on any IP, a specific IP with
// itself and with 0.0.0.0; port <= 0 never conflicts.
func (h HostPortInfo) CheckConflict(ip, protocol string, port int32) bool {
	if port <= 0 {
		return false
	}
	hp := NewHostPort(ip, protocol, port)
	pp := ProtocolPort{Protocol: string(hp.Protocol), Port: port}
	if hp.IP == DefaultBindAllHostIP {
		for _, m := range h {
			if _, ok := m[pp]; ok {
				return true
			}
		}
		return false
	}
	for _, key := range [2]string{DefaultBindAllHostIP, hp.IP} {
		if _, ok := h[key][pp]; ok {
			return true
		}
	}
	return false
}

// hostPortsOf returns the normalised host ports of pod in upstream
// GetHostPorts order: restartable init containers, then regular containers,
// hostPort > 0 only. Nil when there are none.
func hostPortsOf(pod *v1.Pod) []HostPort {
	n := 0
	for i := range pod.Spec.InitContainers {
		if isRestartable(&pod.Spec.InitContainers[i]) {
			n += countHostPorts(pod.Spec.InitContainers[i].Ports)
		}
	}
	for i := range pod.Spec.Containers {
		n += countHostPorts(pod.Spec.Containers[i].Ports)
	}
	if n == 0 {
		return nil
	}
	out := make([]HostPort, 0, n)
	for i := range pod.Spec.InitContainers {
		if isRestartable(&pod.Spec.InitContainers[i]) {
			out = appendHostPorts(out, pod.Spec.InitContainers[i].Ports)
		}
	}
	for i := range pod.Spec.Containers {
		out = appendHostPorts(out, pod.Spec.Containers[i].Ports)
	}
	return out
}

func countHostPorts(ports []v1.ContainerPort) int {
	n := 0
	for i := range ports {
		if ports[i].HostPort > 0 {
			n++
		}
	}
	return n
}

func appendHostPorts(out []HostPort, ports []v1.ContainerPort) []HostPort {
	for i := range ports {
		p := &ports[i]
		if p.HostPort > 0 {
			out = append(out, NewHostPort(p.HostIP, string(p.Protocol), p.HostPort))
		}
	}
	return out
}

// isRestartable reports whether an init container is a sidecar
// (restartPolicy: Always).
func isRestartable(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}
