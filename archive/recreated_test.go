package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// A database recreated between two backups is backed up in full. PouchDB
// Server gives every database the server's own instance_start_time, so
// with integer seqs an update_seq behind the seq reached is the signal too;
// opaque seqs are never compared.
func TestSinceForgottenWhenRecreated(t *testing.T) {
	ctx := context.Background()
	cp := []byte(`{"session_id":"s","source_last_seq":30}`)
	since := &Since{ArchiveID: "prev", Databases: map[string]DBState{
		"int":    {Seq: replicate.Seq("30"), InstanceStart: "100", Checkpoints: map[string]json.RawMessage{"rep": cp}},
		"opaque": {Seq: replicate.Seq(`"30-g1AAAA"`), InstanceStart: "0", Checkpoints: map[string]json.RawMessage{"rep": cp}},
	}}
	for _, tc := range []struct {
		name    string
		db      string
		info    replicate.DBInfo
		keepSeq bool
	}{
		{"grown", "int", replicate.DBInfo{UpdateSeq: replicate.Seq("45"), InstanceStart: "100"}, true},
		{"unchanged", "int", replicate.DBInfo{UpdateSeq: replicate.Seq("30"), InstanceStart: "100"}, true},
		{"seq behind", "int", replicate.DBInfo{UpdateSeq: replicate.Seq("7"), InstanceStart: "100"}, false},
		{"new instance", "int", replicate.DBInfo{UpdateSeq: replicate.Seq("45"), InstanceStart: "200"}, false},
		{"opaque seqs", "opaque", replicate.DBInfo{UpdateSeq: replicate.Seq(`"3-g1BBBB"`), InstanceStart: "0"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, Options{Since: since})
			if err != nil {
				t.Fatal(err)
			}
			d, err := w.Database(tc.db)
			if err != nil {
				t.Fatal(err)
			}
			tc.info.Name = tc.db
			d.SetSourceInfo(tc.info)
			_, gerr := d.GetLocal(ctx, "_local/rep")
			if tc.keepSeq {
				if len(d.Since()) == 0 || gerr != nil {
					t.Errorf("Since() = %q, GetLocal error %v: want the previous seq and checkpoint", d.Since(), gerr)
				}
			} else {
				if d.Since() != nil || !errors.Is(gerr, replicate.ErrNotFound) {
					t.Errorf("Since() = %q, GetLocal error %v: want a full backup (no seq, no checkpoint)", d.Since(), gerr)
				}
			}
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
			if got := len(dbs[0].Since) > 0; got != tc.keepSeq {
				t.Errorf("manifest since %q, want incremental=%v", dbs[0].Since, tc.keepSeq)
			}
		})
	}
}
