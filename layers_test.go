package sofa_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is this module's path (go.mod).
const module = "github.com/sofadb/sofa"

// layers places every package of the module (its directory, "." for the
// root package sofa), lowest layer first. A package's non-test files may
// import packages of lower layers only: never one of its own layer (couch
// and archive stay independent of each other) nor of a higher one. The
// contracts (replicate.Source, replicate.Target) sit below the endpoints
// that implement them (couch, archive), the many-database code (fleet and
// its helpers) above those, the library's API (package sofa) above all of
// them, and the commands on top.
var layers = [][]string{
	{"internal/flock", "internal/wait"},
	{"internal/jsonx", "limitstats", "storage"},
	{"internal/limit", "internal/progress", "storage/s3"},
	{"replicate"},
	{"couch", "archive"},
	{"verify", "metrics"},
	{"fleet"},
	{"internal/dbcopy"},
	{"."},
}

// commands are the main packages (directories under these prefixes): they
// may import any package of the module.
var commands = []string{"cmd/", "bench/cmd/"}

// testSupport packages serve tests (and the commands that load or measure
// servers): no library package imports them.
var testSupport = []string{
	"internal/couchtest",
	"internal/dataset",
	"internal/faultproxy",
	"internal/recproxy",
	"internal/s3test",
	"storage/storagetest",
}

// cliOnly are third-party packages only commands import: the library takes
// options structs, not flags.
var cliOnly = []string{"github.com/spf13/cobra", "github.com/spf13/pflag"}

// TestLayers fails when a package imports one of a layer above its own or
// of its own layer, when a library package imports a test-support package
// or a command-line library, or when a package of the module is in no
// layer (place a new package in layers, commands or testSupport). Only
// non-test files count: tests may import whatever they exercise.
func TestLayers(t *testing.T) {
	imports := moduleImports(t, ".")
	if len(imports) == 0 {
		t.Fatal("no package found")
	}
	rank := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			rank[p] = i
		}
	}
	isCommand := func(p string) bool {
		return slices.ContainsFunc(commands, func(c string) bool { return strings.HasPrefix(p, c) })
	}
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		if isCommand(pkg) {
			continue
		}
		r, inLayer := rank[pkg]
		support := slices.Contains(testSupport, pkg)
		if !inLayer && !support {
			t.Errorf("%s is in no layer: place it in layers_test.go", pkg)
			continue
		}
		for _, imp := range imports[pkg] {
			for _, c := range cliOnly {
				if imp == c || strings.HasPrefix(imp, c+"/") {
					t.Errorf("%s imports %s: only commands (%s) may", pkg, imp, strings.Join(commands, ", "))
				}
			}
			dep, ok := strings.CutPrefix(imp, module)
			if !ok || (dep != "" && dep[0] != '/') {
				continue // standard library or another module
			}
			dep = strings.TrimPrefix(dep, "/")
			if dep == "" {
				dep = "."
			}
			switch {
			case isCommand(dep):
				t.Errorf("%s imports the command %s", pkg, dep)
			case slices.Contains(testSupport, dep):
				if !support {
					t.Errorf("%s imports %s, which only tests and commands may import", pkg, dep)
				}
			case support:
				// Test support may use the library.
			case rank[dep] >= r:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point down, to lower layers only", pkg, r, dep, rank[dep])
			}
		}
	}
}

// moduleImports parses the non-test Go files under root (this module's
// directory) and returns each package directory's imports, sorted. It skips
// testdata, node_modules, hidden directories and nested modules, and files
// constrained by "//go:build ignore".
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root {
				if name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			if cg.Pos() > f.Package {
				break
			}
			for _, c := range cg.List {
				if strings.TrimSpace(c.Text) == "//go:build ignore" {
					return nil
				}
			}
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		for _, is := range f.Imports {
			p, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if !slices.Contains(out[dir], p) {
				out[dir] = append(out[dir], p)
			}
		}
		if _, ok := out[dir]; !ok {
			out[dir] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, imps := range out {
		slices.Sort(imps)
	}
	return out
}
