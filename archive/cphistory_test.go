package archive

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestCheckpointHistoryCut: a checkpoint put into an archive keeps its
// newest history entry only, its other fields as they were; the header
// of an incremental continuing an archive written with whole histories
// cuts them too, without changing the caller's Since.
func TestCheckpointHistoryCut(t *testing.T) {
	ctx := t.Context()
	long := []byte(`{"session_id":"s3","source_last_seq":"9-c","sofa_target_only":true,
		"history":[{"session_id":"s3","recorded_seq":"9-c"},{"session_id":"s2"},{"session_id":"s1"}]}`)
	since := &Since{ArchiveID: "prev", Databases: map[string]DBState{"db": {Seq: []byte(`"9-c"`), Checkpoints: map[string]json.RawMessage{"rep": long}}}}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Options{Since: since})
	if err != nil {
		t.Fatal(err)
	}
	entries := func(what string, b []byte) {
		t.Helper()
		var cp struct {
			SessionID string `json:"session_id"`
			Seq       string `json:"source_last_seq"`
			History   []struct {
				SessionID string `json:"session_id"`
			}
		}
		if err := json.Unmarshal(b, &cp); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if cp.SessionID != "s3" || cp.Seq != "9-c" || len(cp.History) != 1 || cp.History[0].SessionID != "s3" {
			t.Errorf("%s: %s, want session s3, seq 9-c and the newest history entry only", what, b)
		}
	}
	entries("header since", w.Header().Since.Databases["db"].Checkpoints["rep"])
	if !bytes.Equal(since.Databases["db"].Checkpoints["rep"], long) {
		t.Error("the caller's Since was changed")
	}
	d, err := w.Database("db")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.PutLocal(ctx, "rep", long); err != nil {
		t.Fatal(err)
	}
	got, err := d.GetLocal(ctx, "rep")
	if err != nil {
		t.Fatal(err)
	}
	entries("GetLocal", got)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, dbs, err := List(bytes.NewReader(buf.Bytes()))
	if err != nil || len(dbs) != 1 {
		t.Fatalf("List: %v, %v", dbs, err)
	}
	entries("manifest", dbs[0].Checkpoints["rep"])
	if string(newestHistory([]byte(`{"history":[]}`))) != `{"history":[]}` || string(newestHistory([]byte(`[1]`))) != `[1]` {
		t.Error("a body without a history to cut is not kept as is")
	}
}
