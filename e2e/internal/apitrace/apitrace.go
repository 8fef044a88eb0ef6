// Package apitrace records what a client-go client asks the apiserver and
// what its watch streams carry: each list and watch request (resource,
// query), and in watch responses the bookmarks, the initial-events-end
// bookmarks of watch lists, and 410 (Expired/Gone) errors. The tests use
// it to check the reflector's requests (AllowWatchBookmarks, resource
// versions, relists) against a real apiserver.
//
// A Recorder counts by scanning the bytes of JSON responses, so Wrap sets
// the config's content type to JSON.
package apitrace

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// Request is one list or watch request of a recorded client.
type Request struct {
	Seq      int    // order of the request among the Recorder's requests
	Resource string // "pods", "nodes", ...
	Watch    bool
	// Query parameters the reflector sets.
	ResourceVersion, ResourceVersionMatch  string
	AllowWatchBookmarks, SendInitialEvents bool
	Status                                 int // the response's HTTP status (0: no response)
}

// IsRelist reports whether r fetches the whole collection: a list, or a
// watch list (a watch with sendInitialEvents=true).
func (r Request) IsRelist() bool { return !r.Watch || r.SendInitialEvents }

// Counts are the events seen in the watch responses of one resource.
type Counts struct {
	Bookmarks          int // BOOKMARK events (initial-events-end ones included)
	InitialEventsEnds  int // BOOKMARK events with the k8s.io/initial-events-end annotation
	Expired            int // ERROR events with code 410 (Expired or Gone)
	ExpiredListReplies int // list or watch requests answered with HTTP 410
}

// Recorder records the requests of the configs it wrapped. It is safe
// for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	requests []Request          // guarded by mu
	counts   map[string]*Counts // guarded by mu: by resource
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{counts: map[string]*Counts{}} }

// Wrap returns a copy of cfg whose requests r records (JSON content type).
func (r *Recorder) Wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &transport{r: r, next: rt} })
	return c
}

// Requests returns the list and watch requests of resource so far, in
// order.
func (r *Recorder) Requests(resource string) []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Request
	for _, q := range r.requests {
		if q.Resource == resource {
			out = append(out, q)
		}
	}
	return out
}

// Counts returns the watch events seen for resource so far.
func (r *Recorder) Counts(resource string) Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.counts[resource]; c != nil {
		return *c
	}
	return Counts{}
}

func (r *Recorder) countsLocked(resource string) *Counts {
	c := r.counts[resource]
	if c == nil {
		c = &Counts{}
		r.counts[resource] = c
	}
	return c
}

type transport struct {
	r    *Recorder         // immutable
	next http.RoundTripper // immutable
}

// resourceOf returns the collection a request reads: the last path
// segment of /api/v1/pods, /api/v1/namespaces/ns/pods, ...; "" for
// requests of a single object (they are not recorded).
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) == 3 && parts[0] == "api": // api/v1/pods
		return parts[2]
	case len(parts) == 5 && parts[0] == "api" && parts[2] == "namespaces": // api/v1/namespaces/ns/pods
		return parts[4]
	case len(parts) == 4 && parts[0] == "apis": // apis/group/version/resource
		return parts[3]
	case len(parts) == 6 && parts[0] == "apis" && parts[3] == "namespaces":
		return parts[5]
	}
	return ""
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resource := ""
	if req.Method == http.MethodGet {
		resource = resourceOf(req.URL.Path)
	}
	if resource == "" {
		return t.next.RoundTrip(req)
	}
	q := req.URL.Query()
	rec := Request{Resource: resource, Watch: q.Get("watch") == "true" || q.Get("watch") == "1",
		ResourceVersion: q.Get("resourceVersion"), ResourceVersionMatch: q.Get("resourceVersionMatch"),
		AllowWatchBookmarks: q.Get("allowWatchBookmarks") == "true", SendInitialEvents: q.Get("sendInitialEvents") == "true"}
	resp, err := t.next.RoundTrip(req)
	t.r.mu.Lock()
	rec.Seq = len(t.r.requests)
	if resp != nil {
		rec.Status = resp.StatusCode
		if resp.StatusCode == http.StatusGone {
			t.r.countsLocked(resource).ExpiredListReplies++
		}
	}
	t.r.requests = append(t.r.requests, rec)
	t.r.mu.Unlock()
	if err == nil && rec.Watch && resp.Body != nil {
		resp.Body = &scanner{ReadCloser: resp.Body, r: t.r, resource: resource}
	}
	return resp, err
}

// The byte patterns a scanner counts in a JSON watch stream.
var (
	patBookmark = []byte(`"type":"BOOKMARK"`)
	patInitEnd  = []byte(`"k8s.io/initial-events-end":"true"`)
	patExpired  = []byte(`"code":410`)
)

var patterns = [][]byte{patBookmark, patInitEnd, patExpired}

// maxPattern is the longest pattern's length: a scanner keeps that many
// bytes minus one of the previous read, so that a pattern split across
// reads is found once.
var maxPattern = func() int {
	n := 0
	for _, p := range patterns {
		n = max(n, len(p))
	}
	return n
}()

// scanner counts patterns in a watch response body as the reflector
// reads it. Read is called by one goroutine (the watch's decoder).
type scanner struct {
	io.ReadCloser
	r        *Recorder // immutable
	resource string    // immutable
	tail     []byte    // owned by the reading goroutine: the end of the previous read
}

func (s *scanner) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if n > 0 {
		buf := append(s.tail, p[:n]...)
		var found [3]int
		for i, pat := range patterns {
			// A match that lies wholly in the tail was counted by the
			// previous read: count only matches ending in the new bytes.
			start := 0
			for {
				j := bytes.Index(buf[start:], pat)
				if j < 0 {
					break
				}
				if start+j+len(pat) > len(s.tail) {
					found[i]++
				}
				start += j + 1
			}
		}
		if found != [3]int{} {
			s.r.mu.Lock()
			c := s.r.countsLocked(s.resource)
			c.Bookmarks += found[0]
			c.InitialEventsEnds += found[1]
			c.Expired += found[2]
			s.r.mu.Unlock()
		}
		keep := min(len(buf), maxPattern-1)
		s.tail = append(s.tail[:0:0], buf[len(buf)-keep:]...)
	}
	return n, err
}
