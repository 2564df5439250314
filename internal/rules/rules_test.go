// Package rules holds the project's rules as a test: imports point one way
// (docs/design.md) and library code never exits the process.
package rules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sluice-fs/sluice/"

// forbidden maps a package (directory) to packages it must not import.
var forbidden = map[string][]string{
	// The client reaches servers only through the wire protocol.
	"client": {"internal/meta", "internal/kv", "internal/target", "internal/chunk", "internal/server", "internal/fusefs", "internal/s3"},
	// Adapters sit on the client, never on server internals.
	"internal/fusefs": {"internal/meta", "internal/kv", "internal/target", "internal/chunk", "internal/server", "internal/s3"},
	"internal/s3":     {"internal/meta", "internal/kv", "internal/target", "internal/chunk", "internal/server", "internal/fusefs"},
	"internal/cli":    {"internal/meta", "internal/kv", "internal/target", "internal/chunk", "internal/server"},
	"internal/cabi":   {"internal/meta", "internal/kv", "internal/target", "internal/chunk", "internal/server", "internal/fusefs", "internal/s3"},
	// No server package imports another.
	"internal/meta":    {"internal/target", "internal/chunk", "internal/server", "internal/cluster", "client"},
	"internal/cluster": {"internal/meta", "internal/target", "internal/chunk", "internal/server", "client"},
	"internal/target":  {"internal/meta", "internal/kv", "internal/server", "client"},
	"internal/chunk":   {"internal/meta", "internal/kv", "internal/target", "internal/wire", "client"},
	"internal/kv":      {"internal/meta", "internal/target", "internal/chunk", "internal/wire", "client"},
	// Leaves.
	"internal/wire":      {"internal/meta", "internal/kv", "internal/target", "internal/chunk", "client"},
	"internal/placement": {"internal/wire", "internal/meta", "internal/kv", "internal/target", "internal/chunk", "client"},
	"internal/errs":      {"internal/", "client"},
	"internal/checksum":  {"internal/", "client"},
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", dir, err)
	}
	return dir
}

// goFiles returns the non-test Go files below dir, by package directory
// relative to the module root.
func goFiles(t *testing.T, rootDir string, sub ...string) map[string][]string {
	t.Helper()
	out := make(map[string][]string)
	for _, s := range sub {
		filepath.WalkDir(filepath.Join(rootDir, s), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(rootDir, filepath.Dir(p))
			out[rel] = append(out[rel], p)
			return nil
		})
	}
	return out
}

// allowed are single files' exceptions to forbidden, each argued in an
// ADR: the client's direct reads (ADR 0025) read chunk files with the
// store's own reader, so that the on-disk format has one implementation
// of its read rules; no other client file may use the store.
var allowed = map[string]string{
	"client/direct.go": "internal/chunk",
}

func TestImportsPointOneWay(t *testing.T) {
	rootDir := root(t)
	fset := token.NewFileSet()
	for pkg, files := range goFiles(t, rootDir, "client", "internal") {
		var rules []string
		for p, deny := range forbidden {
			if pkg == p || strings.HasPrefix(pkg, p+"/") {
				rules = append(rules, deny...)
			}
		}
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				rel, ok := strings.CutPrefix(path, module)
				if !ok {
					continue
				}
				if fr, _ := filepath.Rel(rootDir, f); allowed[fr] == rel {
					continue
				}
				for _, d := range rules {
					if rel == d || strings.HasPrefix(rel, strings.TrimSuffix(d, "/")+"/") || (strings.HasSuffix(d, "/") && strings.HasPrefix(rel, d)) {
						t.Errorf("%s imports %s: %s must not depend on %s (docs/design.md)", f, path, pkg, d)
					}
				}
			}
		}
	}
}

// TestNoExitInLibraries checks that only cmd/ ends the process: library
// code returns errors.
func TestNoExitInLibraries(t *testing.T) {
	rootDir := root(t)
	fset := token.NewFileSet()
	banned := map[string]bool{"log.Fatal": true, "log.Fatalf": true, "log.Fatalln": true, "os.Exit": true, "log.Panic": true, "log.Panicf": true}
	for _, files := range goFiles(t, rootDir, "client", "internal") {
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(af, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && banned[id.Name+"."+sel.Sel.Name] {
					t.Errorf("%s: %s.%s in library code (return an error; only cmd/ exits)", fset.Position(call.Pos()), id.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
