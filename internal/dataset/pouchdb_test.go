package dataset

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// startPouchDBServer starts an in-memory PouchDB Server from the
// repository's node_modules on a free loopback port and returns its URL.
// It skips the test in -short mode or when the server is not installed.
func startPouchDBServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PouchDB Server")
	}
	bin, err := filepath.Abs(filepath.Join("..", "..", "node_modules", ".bin", "pouchdb-server"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("pouchdb-server not installed (run npm ci at the repository root): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--in-memory", "--host", "127.0.0.1", "--port", fmt.Sprint(port), "-n")
	cmd.Dir = t.TempDir() // it writes config.json and log.txt into its cwd
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			return u
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("pouchdb-server did not start within 30s")
	return ""
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestLoadIntoPouchDBServer(t *testing.T) {
	nm := nodeModules(t)
	srv := startPouchDBServer(t)
	dbs, err := Real(nm, Options{Scale: 0.01, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := Preset(PresetRevTree, 0.01)
	dbs = append(dbs, rt.DB())
	res, err := (&Loader{}).LoadAll(context.Background(), srv, dbs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if len(r.Failures) > 0 {
			t.Errorf("%s: refused %q", r.DB, r.Failures)
		}
		var info struct {
			DocCount  int `json:"doc_count"`
			UpdateSeq int `json:"update_seq"`
		}
		getJSON(t, srv+"/"+r.DB, &info)
		// Every revision written is one update; tombstones are not counted
		// in doc_count.
		if info.UpdateSeq != dbs[i].Revs {
			t.Errorf("%s: update_seq %d, want %d", r.DB, info.UpdateSeq, dbs[i].Revs)
		}
	}
	var doc struct {
		Conflicts []string `json:"_conflicts"`
	}
	getJSON(t, srv+"/revtree/doc-00000000?conflicts=true", &doc)
	if len(doc.Conflicts) != 2 {
		t.Errorf("revtree/doc-00000000 has %d conflicts, want 2", len(doc.Conflicts))
	}
	var tomb struct {
		Deleted bool `json:"_deleted"`
	}
	getJSON(t, srv+"/revtree/doc-00000009?rev="+tombRev(t, srv), &tomb)
	if !tomb.Deleted {
		t.Error("revtree/doc-00000009 is not a tombstone")
	}
	resp, err := http.Get(srv + "/country-ad/country/flag.svg")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "image/svg+xml" {
		t.Errorf("flag.svg: %s, %q", resp.Status, ct)
	}
}

// tombRev returns the winning rev of revtree/doc-00000009 from _changes.
func tombRev(t *testing.T, srv string) string {
	var ch struct {
		Results []struct {
			ID      string `json:"id"`
			Deleted bool   `json:"deleted"`
			Changes []struct {
				Rev string `json:"rev"`
			} `json:"changes"`
		} `json:"results"`
	}
	getJSON(t, srv+"/revtree/_changes", &ch)
	for _, r := range ch.Results {
		if r.ID == "doc-00000009" {
			if !r.Deleted {
				t.Errorf("changes row for doc-00000009 not deleted")
			}
			return r.Changes[0].Rev
		}
	}
	t.Fatal("doc-00000009 not in _changes")
	return ""
}
