package apitrace

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const stream = `{"type":"ADDED","object":{"kind":"Pod"}}
{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}
{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"13"}}}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"Expired","code":410}}
`

// Every pattern is counted once whatever the read sizes.
func TestScannerCountsAcrossReads(t *testing.T) {
	for _, size := range []int{1, 2, 3, 7, 16, 33, len(stream)} {
		r := New()
		s := &scanner{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), r: r, resource: "pods"}
		if size > 1 {
			s.ReadCloser = io.NopCloser(&chunked{s: stream, n: size})
		}
		_, err := io.ReadAll(s)
		require.NoError(t, err)
		require.Equal(t, Counts{Bookmarks: 2, InitialEventsEnds: 1, Expired: 1}, r.Counts("pods"), "read size %d", size)
	}
}

type chunked struct {
	s string
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.s))
	copy(p, c.s[:k])
	c.s = c.s[k:]
	return k, nil
}

func TestResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/pods":                      "pods",
		"/api/v1/namespaces/ns/pods":        "pods",
		"/api/v1/namespaces/ns/pods/p":      "",
		"/api/v1/nodes/n":                   "",
		"/apis/scheduling.k8s.io/v1/x":      "x",
		"/apis/g/v1/namespaces/ns/things":   "things",
		"/apis/g/v1/namespaces/ns/things/t": "",
		"/healthz":                          "",
	} {
		require.Equal(t, want, resourceOf(path), path)
	}
}

// Failed requests are recorded with status 0; single objects are not.
func TestTransportRecords(t *testing.T) {
	r := New()
	tr := &transport{r: r, next: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if strings.Contains(req.URL.RawQuery, "fail") {
			return nil, io.ErrUnexpectedEOF
		}
		return &http.Response{StatusCode: http.StatusGone, Body: io.NopCloser(strings.NewReader(""))}, nil
	})}
	for _, u := range []string{
		"https://h/api/v1/pods?resourceVersion=5&resourceVersionMatch=NotOlderThan",
		"https://h/api/v1/pods?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&fail=1",
		"https://h/api/v1/namespaces/ns/pods/p",
	} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
	}
	got := r.Requests("pods")
	require.Len(t, got, 2)
	require.Equal(t, Request{Seq: 0, Resource: "pods", ResourceVersion: "5", ResourceVersionMatch: "NotOlderThan", Status: http.StatusGone}, got[0])
	require.Equal(t, Request{Seq: 1, Resource: "pods", Watch: true, AllowWatchBookmarks: true, SendInitialEvents: true}, got[1])
	require.True(t, got[0].IsRelist() && got[1].IsRelist())
	require.Equal(t, 1, r.Counts("pods").ExpiredListReplies)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
