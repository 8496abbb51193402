package sofa_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCopy_ReplicasAboveNodesWarned: databases created with n replicas on
// a target of fewer nodes get n = nodes from CouchDB without an error; a
// whole-server copy and a restore asked for n=3 on a single node say so
// in their summary's warnings, and with n=1 they do not. PouchDB Server
// has no /_membership and no replicas: nothing to warn of.
func TestCopy_ReplicasAboveNodesWarned(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "replicas (n) and /_membership are CouchDB's")
	ctx := t.Context()
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	seed(t, src, "a", 3)
	warned := func(what string, sum *sofa.Summary, err error, want bool) {
		t.Helper()
		if err != nil || !sum.Complete() {
			t.Fatalf("%s: %+v, %v", what, sum, err)
		}
		got := slices.ContainsFunc(sum.Warnings, func(w string) bool {
			return strings.Contains(w, "n=3 replicas asked") && strings.Contains(w, "has 1 node(s) (/_membership): CouchDB creates them with n=1")
		})
		if got != want {
			t.Errorf("%s: warnings %q, want the replicas warning: %v", what, sum.Warnings, want)
		}
	}
	s, d := openAt(t, src.URL, nil), openAt(t, tgt.URL, nil)
	sum, err := sofa.Copy(ctx, s, d, sofa.CopyOptions{N: 3})
	warned("copy with n=3", sum, err, true)
	sum, err = sofa.Copy(ctx, s, d, sofa.CopyOptions{N: 1})
	warned("copy with n=1", sum, err, false)
	arch := openAt(t, filepath.Join(t.TempDir(), "a.sofa"), nil)
	if sum, err := sofa.Backup(ctx, s, arch, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	tgt2 := couchtest.Start(t)
	sum, err = sofa.Restore(ctx, []*sofa.Endpoint{arch}, openAt(t, tgt2.URL, nil), sofa.RestoreOptions{N: 3})
	warned("restore with n=3", sum, err, true)
}
