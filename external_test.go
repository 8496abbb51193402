package sofa_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestExternalModule: a module outside this one imports the library (a
// replace directive pointing here, offline) and copies a server to
// another with it.
func TestExternalModule(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(file)
	dir := t.TempDir()
	gomod := "module example.com/user\n\ngo 1.26.0\n\nrequire github.com/sofadb/sofa v0.0.0\n\nreplace github.com/sofadb/sofa => " + root + "\n"
	main := `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sofadb/sofa"
)

func main() {
	ctx := context.Background()
	src, err := sofa.Open(ctx, os.Args[1], sofa.OpenOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dst, err := sofa.Open(ctx, os.Args[2], sofa.OpenOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sum, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"ext"}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("dbs=%d ok=%d written=%d\n", sum.DBsTotal, sum.DBsOK, sum.DocsWritten)
}
`
	for name, body := range map[string]string{"go.mod": gomod, "main.go": main} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// go.sum: this module's requirements are the library's.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	build := exec.Command("go", "build", "-o", "copier", ".")
	build.Dir, build.Env = dir, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build of an outside module: %v\n%s", err, out)
	}

	a, b := couchtest.Start(t), couchtest.Start(t)
	seed(t, a, "ext", 7)
	run := exec.CommandContext(context.Background(), filepath.Join(dir, "copier"), a.URL, b.URL)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("outside module's copy: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "dbs=1 ok=1 written=7" {
		t.Fatalf("outside module printed %q", got)
	}
	couchtest.AssertEqual(t, a.URL+"/ext", b.URL+"/ext")
}
