package sofa_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
)

// A whole-server copy, backup, verify and sync catch-up list the system databases their
// default Skip left out (LeftOut, with the option that selects each), as
// a restore lists the archive's _replicator; a selection that names
// databases (Include), or one that takes _users in, lists none of them.
func TestWholeServer_SkippedSystemDBsListed(t *testing.T) {
	ctx := t.Context()
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	seed(t, src, "a", 2)
	c := couchtest.NewClient(src.URL)
	for _, db := range []string{"_users", "_replicator", "_global_changes"} {
		_, _ = c.Do(ctx, "PUT", "/"+db, nil, nil) // 412 when the server made it
	}
	var listed []string
	if _, err := c.Do(ctx, "GET", "/_all_dbs", nil, &listed); err != nil {
		t.Fatal(err)
	}
	has := func(want ...string) []string {
		var out []string
		for _, w := range want {
			if slices.Contains(listed, w) {
				out = append(out, w)
			}
		}
		return out
	}
	names := func(l []fleet.LeftOut) []string {
		var out []string
		for _, x := range l {
			out = append(out, x.Name)
			if !strings.Contains(x.Reason, "a system database: ") || !strings.Contains(x.Reason, "selects it") {
				t.Errorf("%s: reason %q", x.Name, x.Reason)
			}
		}
		slices.Sort(out)
		return out
	}
	check := func(what string, got, want []string) {
		t.Helper()
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: left out %q, want %q (listed: %q)", what, got, want, listed)
		}
	}
	if len(has("_users", "_replicator")) < 2 {
		t.Fatalf("the source lists %q: want _users and _replicator", listed)
	}
	s, d := openAt(t, src.URL, nil), openAt(t, tgt.URL, nil)
	sum, err := sofa.Copy(ctx, s, d, sofa.CopyOptions{})
	if err != nil || !sum.Complete() {
		t.Fatalf("copy: %+v, %v", sum, err)
	}
	check("copy", names(sum.LeftOut), has("_users", "_replicator", "_global_changes"))
	sum, err = sofa.Copy(ctx, s, d, sofa.CopyOptions{Selection: sofa.Selection{Skip: sofa.WithoutUsers(sofa.ReplicateSkip, true)}})
	if err != nil || !sum.Complete() {
		t.Fatalf("copy with _users: %+v, %v", sum, err)
	}
	check("copy with _users", names(sum.LeftOut), has("_replicator", "_global_changes"))
	sum, err = sofa.Copy(ctx, s, d, sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"a"}}})
	if err != nil || !sum.Complete() {
		t.Fatalf("copy of a: %+v, %v", sum, err)
	}
	check("copy of a", names(sum.LeftOut), nil)
	v, err := sofa.Verify(ctx, s, d, sofa.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("verify", names(v.LeftOut), has("_users", "_replicator", "_global_changes"))
	arch := openAt(t, t.TempDir()+"/b.sofa", nil)
	sum, err = sofa.Backup(ctx, s, arch, sofa.BackupOptions{})
	if err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	check("backup", names(sum.LeftOut), has("_global_changes"))
	// and a continuous run's catch-up (found by a tester: none listed)
	r := startSync(t, src.URL, tgt.URL, sofa.SyncOptions{})
	r.wait("the catch-up", func() bool { return r.caughtUp })
	ss, _ := r.stop()
	if ss == nil || ss.CatchUp == nil {
		t.Fatalf("sync: no catch-up summary: %+v", ss)
	}
	check("sync", names(ss.CatchUp.LeftOut), has("_users", "_replicator", "_global_changes"))
}
