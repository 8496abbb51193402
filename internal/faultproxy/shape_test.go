package faultproxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestProxy_ConnBytesPerSec: a request body through a connection capped
// at 1 MB/s takes at least its size over the rate (less the burst), and
// the cap can be lifted.
func TestProxy_ConnBytesPerSec(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Write([]byte{byte(n >> 20)})
	}))
	defer target.Close()
	p := StartT(t, target.URL)
	body := make([]byte, 2<<20)
	put := func() time.Duration {
		t0 := time.Now()
		resp, err := http.Post(p.URL+"/x", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(b) != 1 || b[0] != 2 {
			t.Fatalf("target saw %v MiB", b)
		}
		return time.Since(t0)
	}
	p.SetLimits(Limits{ConnBytesPerSec: 1 << 20})
	if d, want := put(), time.Duration(float64(len(body)-shapeBurst)/(1<<20)*float64(time.Second)); d < want {
		t.Fatalf("2 MiB at 1 MiB/s took %v, want at least %v", d, want)
	}
	p.SetLimits(Limits{})
	put() // no cap: just works
}

// TestProxy_KeepHost: with KeepHost the target sees the Host and
// Accept-Encoding the client sent (what a signature covers).
func TestProxy_KeepHost(t *testing.T) {
	var host, enc string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, enc = r.Host, r.Header.Get("Accept-Encoding")
	}))
	defer target.Close()
	p := StartT(t, target.URL)
	get := func() {
		req, _ := http.NewRequest("GET", p.URL+"/k", nil)
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get()
	if host == p.URL[len("http://"):] || enc != "" {
		t.Fatalf("without KeepHost: Host %q, Accept-Encoding %q", host, enc)
	}
	p.KeepHost()
	get()
	if host != p.URL[len("http://"):] || enc != "identity" {
		t.Fatalf("with KeepHost: Host %q, Accept-Encoding %q; want %q, identity", host, enc, p.URL[len("http://"):])
	}
}
