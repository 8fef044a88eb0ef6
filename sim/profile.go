package sim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	rpprof "runtime/pprof"
	"runtime/trace"
	"sync"
)

// Profiles for people benchmarking: -cpuprofile, -memprofile and -trace
// write runtime/pprof's CPU and heap profiles and runtime/trace's
// execution trace of the whole command (a sweep's every run); -pprof
// serves net/http/pprof for as long as it runs. The files are outputs as
// -json's are: created before the run starts (a bad path is refused with
// exit 2), written to a temporary file and renamed over the destination
// once the report is written.

// ProfileConfig is a plain value: the profiles asked for ("" none).
type ProfileConfig struct {
	CPU   string // -cpuprofile: the CPU profile's path
	Mem   string // -memprofile: the heap profile's path, written at the end
	Trace string // -trace: the execution trace's path
	Pprof string // -pprof: the address of the net/http/pprof server
}

// profileFlags binds -cpuprofile, -memprofile, -trace and -pprof to cfg.
func profileFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.Profile.CPU, "cpuprofile", cfg.Profile.CPU, "write a CPU profile of the whole command to this path (go tool pprof)")
	fs.StringVar(&cfg.Profile.Mem, "memprofile", cfg.Profile.Mem, "write a heap profile (allocations since the start, live heap at the end) to this path")
	fs.StringVar(&cfg.Profile.Trace, "trace", cfg.Profile.Trace, "write a runtime/trace execution trace of the whole command to this path (go tool trace)")
	fs.StringVar(&cfg.Profile.Pprof, "pprof", cfg.Profile.Pprof, "serve net/http/pprof at this address (host:port; :0 picks a port) while the command runs")
}

// ErrProfile is wrapped by the errors of starting or writing a profile
// that are not the user's (another CPU profile or trace already running,
// a write failing).
var ErrProfile = errors.New("sim: profile")

// profiler is the profiles of one command, owned by the goroutine that
// started them (realMain or runSweep), which stops them. Its server
// goroutine is owned by it: stop closes the server and waits for it.
type profiler struct {
	mem     io.Writer     // -memprofile's temporary file (nil: none)
	cpuOn   bool          // a CPU profile is running
	traceOn bool          // a trace is running
	srv     *http.Server  // -pprof's server (nil: none)
	served  chan struct{} // closed when the server goroutine returns
	addr    string        // the server's address, as listened on
	once    sync.Once     // guards stop
	err     error         // stop's result
}

// startProfiles opens pc's files through outs (their errors are
// *UsageErrors naming the flag), listens on -pprof's address (a
// *UsageError too), then starts the CPU profile, the trace and the
// server, and says where the server is on stderr. On error what was
// started is stopped; the files are left to outs.
func startProfiles(pc ProfileConfig, outs *outputs, stderr io.Writer) (*profiler, error) {
	p := &profiler{}
	var cpu, tr io.Writer
	for _, f := range []struct {
		flag, path string
		w          *io.Writer
	}{{"cpuprofile", pc.CPU, &cpu}, {"memprofile", pc.Mem, &p.mem}, {"trace", pc.Trace, &tr}} {
		if f.path == "" {
			continue
		}
		if f.path == "-" {
			return nil, bad(f.flag, "needs a file (the profile is binary), not stdout")
		}
		w, err := outs.open(f.path)
		if err != nil {
			return nil, bad(f.flag, "%v", err)
		}
		*f.w = w
	}
	var ln net.Listener
	if pc.Pprof != "" {
		var err error
		if ln, err = net.Listen("tcp", pc.Pprof); err != nil {
			return nil, bad("pprof", "cannot listen on %q: %v", pc.Pprof, err)
		}
	}
	if cpu != nil {
		if err := rpprof.StartCPUProfile(cpu); err != nil {
			closeListener(ln)
			return nil, fmt.Errorf("%w: -cpuprofile: %v", ErrProfile, err)
		}
		p.cpuOn = true
	}
	if tr != nil {
		if err := trace.Start(tr); err != nil {
			closeListener(ln)
			p.stop()
			return nil, fmt.Errorf("%w: -trace: %v", ErrProfile, err)
		}
		p.traceOn = true
	}
	if ln != nil {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		p.srv, p.served, p.addr = &http.Server{Handler: mux}, make(chan struct{}), ln.Addr().String()
		go p.serve(ln) // owned by p: stop closes the server and waits
		fmt.Fprintf(stderr, "loadgen: pprof at http://%s/debug/pprof/\n", p.addr)
	}
	return p, nil
}

func closeListener(ln net.Listener) {
	if ln != nil {
		ln.Close()
	}
}

// serve is the server goroutine: it serves until stop closes the server.
func (p *profiler) serve(ln net.Listener) {
	defer close(p.served)
	_ = p.srv.Serve(ln) // http.ErrServerClosed once stop closes it
}

// stop stops the CPU profile and the trace, writes the heap profile and
// closes the server, waiting for its goroutine; later calls return the
// first call's result. The files are committed or removed by their
// outputs.
func (p *profiler) stop() error {
	if p == nil {
		return nil
	}
	p.once.Do(func() {
		if p.cpuOn {
			rpprof.StopCPUProfile()
		}
		if p.traceOn {
			trace.Stop()
		}
		if p.mem != nil {
			runtime.GC() // the live heap as of the end
			if err := rpprof.Lookup("heap").WriteTo(p.mem, 0); err != nil {
				p.err = fmt.Errorf("%w: -memprofile: %v", ErrProfile, err)
			}
		}
		if p.srv != nil {
			p.srv.Close() // its listener and connections; Serve returns
			<-p.served
		}
	})
	return p.err
}
