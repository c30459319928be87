package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The code's shape, checked so it stays true: no non-test Go file over 700
// lines, no function over 100 lines (go test -run TestCodeShape . lists
// every offender).
func TestCodeShape(t *testing.T) {
	const maxFile, maxFunc = 700, 100
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		if n := fset.File(f.Pos()).LineCount(); n > maxFile {
			t.Errorf("%s: %d lines, over %d: split it by concept", path, n, maxFile)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFunc {
				t.Errorf("%s: func %s: %d lines, over %d", path, fn.Name.Name, n, maxFunc)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d Go files found: is the walk rooted at the module?", files)
	}
}

// The whole-program tests are found by name: a test file of the root
// package says what its tests start by its prefix (docs/contributing.md,
// "Where the tests live"); the few others are the harness and the root's own unit
// and meta tests, listed here.
func TestRootTestFilesNamedForWhatTheyStart(t *testing.T) {
	prefixes := []string{"binary_", "secondaries_", "sim_", "node_", "tmux_", "netns_", "inproc_"}
	others := []string{"harness_test.go", "race_test.go", "shape_test.go", "wiring_test.go", "docs_test.go"}
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) < 20 {
		t.Fatalf("root test files: %d, %v", len(files), err)
	}
	for _, f := range files {
		if !slices.Contains(others, f) && !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(f, p) }) {
			t.Errorf("%s: name it for what its tests start (%s), or list it here if it starts nothing", f, strings.Join(prefixes, ", "))
		}
	}
}
