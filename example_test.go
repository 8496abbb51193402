package sofa_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/verify"
)

// Open a CouchDB server (or database) URL, an archive path, or "-".
func ExampleOpen() {
	ctx := context.Background()
	src, err := sofa.Open(ctx, "http://admin:secret@old.example.com:5984", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err) // never holds the password
	}
	fmt.Println(src) // http://admin@old.example.com:5984 (no password)
	ar, err := sofa.Open(ctx, "nightly.sofa", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ar.Kind() == sofa.KindArchive)
}

// Copy every database of one server to another, verifying each one.
// It needs CouchDB servers: it is compiled, not run (the examples of
// CheckArchives, ListArchive, VerifyChain, PlanRestore and Backup_kinds
// run offline).
func ExampleCopy() {
	ctx := context.Background()
	src, err := sofa.Open(ctx, "http://admin:secret@old.example.com:5984", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	dst, err := sofa.Open(ctx, "http://admin:secret@new.example.com:5984", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	sum, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{
		Selection: sofa.Selection{Exclude: []string{"tmp-*"}},
		Verify:    sofa.VerifyFull,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, db := range sum.DBs {
		fmt.Println(db.Name, db.Status, db.DocsWritten)
	}
}

// Back a server up into an archive file.
// It needs CouchDB servers: it is compiled, not run (the examples of
// CheckArchives, ListArchive, VerifyChain, PlanRestore and Backup_kinds
// run offline).
func ExampleBackup() {
	ctx := context.Background()
	src, err := sofa.Open(ctx, "http://admin:secret@db.example.com:5984", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	ar, err := sofa.Open(ctx, "full.sofa", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	sum, err := sofa.Backup(ctx, src, ar, sofa.BackupOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sum.Complete())
}

// Compare two servers, every document and leaf revision.
// It needs CouchDB servers: it is compiled, not run (the examples of
// CheckArchives, ListArchive, VerifyChain, PlanRestore and Backup_kinds
// run offline).
func ExampleVerify() {
	ctx := context.Background()
	a, err := sofa.Open(ctx, "http://admin:secret@old.example.com:5984", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	b, err := sofa.Open(ctx, "http://admin:secret@new.example.com:5984", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := sofa.Verify(ctx, a, b, sofa.VerifyOptions{Compare: verify.Options{Mode: verify.Full}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Equal)
}

// Restore a chain of archives (a full one, then its incrementals in
// order) into a server, checking each database's counts afterwards.
// It needs CouchDB servers: it is compiled, not run (the examples of
// CheckArchives, ListArchive, VerifyChain, PlanRestore and Backup_kinds
// run offline).
func ExampleRestore() {
	ctx := context.Background()
	var chain []*sofa.Endpoint
	for _, loc := range []string{"full.sofa", "inc1.sofa", "inc2.sofa"} {
		ar, err := sofa.Open(ctx, loc, sofa.OpenOptions{})
		if err != nil {
			log.Fatal(err)
		}
		chain = append(chain, ar)
	}
	dst, err := sofa.Open(ctx, "http://admin:secret@new.example.com:5984", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	sum, err := sofa.Restore(ctx, chain, dst, sofa.RestoreOptions{Verify: sofa.VerifyCheap})
	if err != nil {
		log.Fatal(err) // a chain that does not hold together is an *OptionError
	}
	fmt.Println(sum.DBsOK, "of", sum.DBsTotal, "restored")
}

// An archive location is opened without being read (a backup creates
// it); a location's credentials never appear in its name.
func ExampleOpen_archive() {
	ar, err := sofa.Open(context.Background(), "nightly.sofa", sofa.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ar, ar.Kind() == sofa.KindArchive)
	fmt.Println(sofa.Redact("http://admin:secret@db.example.com:5984/orders"))
	// Output:
	// nightly.sofa true
	// http://admin@db.example.com:5984/orders
}
