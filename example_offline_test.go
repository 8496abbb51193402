package sofa_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
)

// The examples below run without a server: their archives are written
// into a storage.Memory by exampleArchive (as a backup would write them).
// Copy, Backup, Restore's Run and Verify read or write a CouchDB server;
// offline they are shown refusing endpoints of the wrong kind, which they
// do before any request.

// openAll opens the named archives of st, in the order given.
func openAll(ctx context.Context, st storage.Store, names ...string) ([]*sofa.Endpoint, error) {
	var eps []*sofa.Endpoint
	for _, name := range names {
		ep, err := sofa.Open(ctx, name, sofa.OpenOptions{Store: st})
		if err != nil {
			return nil, err
		}
		eps = append(eps, ep)
	}
	return eps, nil
}

// exampleArchive writes a full archive called name into st: a database
// "orders" of docs documents and an empty database "users".
func exampleArchive(st storage.Store, name string, docs int) {
	ctx := context.Background()
	w, err := st.Create(ctx, name, storage.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	aw, err := archive.NewWriter(w, archive.Options{Tool: "example"})
	if err != nil {
		log.Fatal(err)
	}
	for _, db := range []string{"orders", "users"} {
		d, err := aw.Database(db)
		if err != nil {
			log.Fatal(err)
		}
		n := docs
		if db == "users" {
			n = 0
		}
		var revs []*replicate.Doc
		for i := range n {
			id, rev := fmt.Sprintf("order-%d", i), fmt.Sprintf("%032x", i+1)
			revs = append(revs, &replicate.Doc{ID: id, Rev: "1-" + rev, Revisions: replicate.Revisions{Start: 1, IDs: []string{rev}},
				Body: []byte(fmt.Sprintf(`{"_id":%q,"_rev":"1-%s","n":%d}`, id, rev, i))})
		}
		if rejected, err := d.WriteDocs(ctx, revs); err != nil || len(rejected) > 0 {
			log.Fatal(err, rejected)
		}
		if err := d.Close(); err != nil {
			log.Fatal(err)
		}
	}
	if err := aw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		log.Fatal(err)
	}
}

// Check an archive without a server (what sofa verify ARCHIVE does):
// every checksum, the records and the manifest; a database not backed up
// whole makes it incomplete.
func ExampleCheckArchives() {
	ctx := context.Background()
	st := &storage.Memory{}
	exampleArchive(st, "nightly.sofa", 3)
	ar, err := sofa.Open(ctx, "nightly.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	sum, err := sofa.CheckArchives(ctx, ar)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sum.Status, sum.Databases, sum.Archives[0].Report.Revisions)
	// Output:
	// sound 2 3
}

// List the databases of an archive from its manifest.
func ExampleListArchive() {
	ctx := context.Background()
	st := &storage.Memory{}
	exampleArchive(st, "nightly.sofa", 3)
	ar, err := sofa.Open(ctx, "nightly.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	hdr, dbs, err := sofa.ListArchive(ctx, ar)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(hdr.Tool, hdr.Since == nil) // a full archive
	for _, db := range dbs {
		fmt.Println(db.Name, db.Revisions, db.Tombstones)
	}
	// Output:
	// example true
	// orders 3 0
	// users 0 0
}

// A chain of archives is a full one, then incrementals in order, each
// continuing the one before it (what sofa verify FULL INC... and a
// restore check): two full archives are refused before either is read.
func ExampleVerifyChain() {
	ctx := context.Background()
	st := &storage.Memory{}
	exampleArchive(st, "monday.sofa", 3)
	exampleArchive(st, "tuesday.sofa", 4)
	chain, err := openAll(ctx, st, "monday.sofa", "tuesday.sofa")
	if err != nil {
		log.Fatal(err)
	}
	_, err = sofa.VerifyChain(ctx, chain...)
	var oe *sofa.OptionError
	fmt.Println(errors.As(err, &oe), errors.Is(err, archive.ErrChain))
	sum, err := sofa.VerifyChain(ctx, chain[0]) // a full archive alone is a chain
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sum.Status)
	// Output:
	// true true
	// sound
}

// A restore is planned before any target is contacted: its options and
// its chain of archives are checked offline (an *OptionError). Run then
// restores the plan into a CouchDB server (see ExampleRestore).
func ExamplePlanRestore() {
	ctx := context.Background()
	st := &storage.Memory{}
	exampleArchive(st, "monday.sofa", 3)
	exampleArchive(st, "tuesday.sofa", 4)
	chain, err := openAll(ctx, st, "monday.sofa", "tuesday.sofa")
	if err != nil {
		log.Fatal(err)
	}
	_, err = sofa.PlanRestore(ctx, chain[:1], sofa.RestoreOptions{Verify: sofa.VerifyCheap})
	fmt.Println(err)
	_, err = sofa.PlanRestore(ctx, chain, sofa.RestoreOptions{})
	fmt.Println(errors.Is(err, archive.ErrChain))
	_, err = sofa.PlanRestore(ctx, chain[:1], sofa.RestoreOptions{Replace: true, ReuseExisting: true})
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// --replace and --reuse-existing exclude each other: --replace deletes and recreates existing databases, --reuse-existing writes into them
}

// Backup reads a CouchDB server, a database or a full archive and writes
// an archive; Copy needs servers and names the verb to use for an archive;
// Verify takes an archive first. Given the wrong kinds they refuse with an
// *OptionError before any request.
func ExampleBackup_kinds() {
	ctx := context.Background()
	st := &storage.Memory{}
	exampleArchive(st, "nightly.sofa", 3)
	a, err := sofa.Open(ctx, "nightly.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	b, err := sofa.Open(ctx, "copy.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	sum, err := sofa.Backup(ctx, a, b, sofa.BackupOptions{})
	fmt.Println(sum.DBsOK, "databases copied into copy.sofa,", err)
	_, err = sofa.Backup(ctx, a, a, sofa.BackupOptions{Overwrite: true})
	fmt.Println(err)
	_, err = sofa.Copy(ctx, a, b, sofa.CopyOptions{})
	fmt.Println(err)
	_, err = sofa.Verify(ctx, a, b, sofa.VerifyOptions{})
	fmt.Println(err)
	// Output:
	// 2 databases copied into copy.sofa, <nil>
	// SOURCE and TARGET are the same archive (nightly.sofa)
	// copy: nightly.sofa to copy.sofa: to copy an archive into a new archive use backup (sofa backup nightly.sofa copy.sofa)
	// verify: nightly.sofa and copy.sofa are both archives: check archives with CheckArchives or VerifyChain, or compare one with a server
}
