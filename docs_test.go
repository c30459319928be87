package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/smf/man"
	"github.com/tritondatacenter/cns/smf/man/mantest"
)

// cns(8) is built from the command line's own help: the committed page is
// what manPage makes now (go generate, or -update, rewrites it),
// names every command but the hidden ones, and groff renders it without
// a warning.
func TestManPageCNS(t *testing.T) {
	page, err := manPage()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"serve", "db info", "db export", "db check", "db restore", "db compact", "adm", "tui", "version", "sim"} {
		if !strings.Contains(page, "\\fB"+man.Word("cns "+cmd)+"\\fR") {
			t.Errorf("the page lacks cns %s", cmd)
		}
	}
	for _, hidden := range []string{"cns man", "cns adm status"} {
		if strings.Contains(page, man.Word(hidden)) {
			t.Errorf("the page lists %s (hidden, or cnsadm(1)'s)", hidden)
		}
	}
	out := mantest.Check(t, manPath, page, *update, "go generate . (or go test -run TestManPageCNS . -update)")
	for _, want := range []string{"SIGHUP", "EXIT STATUS", "96", "CNS_API", "/data/cns/cns.db", "cnsadm(1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the rendered page lacks %q:\n%s", want, out)
		}
	}
}

// Every example of cns(8) is a command line cns accepts, and the page
// shows it.
func TestManExamplesCNS(t *testing.T) {
	page, err := manPage()
	if err != nil {
		t.Fatal(err)
	}
	mantest.Examples(t, page, "cns", examples, func() any { return &CLI{} })
}

// userDocs are the manual's files: the README, the chapters in docs/,
// the performance and reliability chapters and the changelog.
func userDocs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil || len(files) < 10 {
		t.Fatalf("docs/*.md: %d files, %v", len(files), err)
	}
	return append([]string{"README.md", "CHANGELOG.md", "BENCHMARKS.md", "RELIABILITY.md"}, files...)
}

// The manual's links and the paths it names hold: every relative link
// of every Markdown file in the repository reaches a file (and, with
// #anchor, a heading of it), every repository path and every test the
// manual names exists, and no file anywhere points outside the
// repository.
func TestDocsLinks(t *testing.T) {
	var mds []string
	var all []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".git") || path == "testdata/var") {
				return filepath.SkipDir
			}
			return nil
		}
		all = append(all, path)
		if strings.HasSuffix(path, ".md") {
			mds = append(mds, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]map[string]bool{} // file -> anchors
	anchorsOf := func(file string) map[string]bool {
		if h, ok := headings[file]; ok {
			return h
		}
		data, _ := os.ReadFile(file)
		h := markdownAnchors(string(data))
		headings[file] = h
		return h
	}
	for _, md := range mds {
		data, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range markdownLinks(string(data)) {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			file := md
			if target != "" {
				file = filepath.Join(filepath.Dir(md), target)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %q: %s does not exist", md, link, file)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(file, ".md") && !anchorsOf(file)[anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", md, link, file, anchor)
			}
		}
	}
	for _, doc := range userDocs(t) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range repoPaths(string(data)) {
			if matches, _ := filepath.Glob(strings.TrimSuffix(p, "/")); len(matches) == 0 && !slices.Contains(notInTree, p) {
				t.Errorf("%s names %s, which is not in the repository", doc, p)
			}
		}
	}
	// The tests and benchmarks the manual names exist (a name may be a
	// -run pattern's prefix).
	var funcs []string
	for _, f := range all {
		if strings.HasSuffix(f, "_test.go") {
			data, _ := os.ReadFile(f)
			for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`).FindAllStringSubmatch(string(data), -1) {
				funcs = append(funcs, m[1])
			}
		}
	}
	for _, doc := range userDocs(t) {
		data, _ := os.ReadFile(doc)
		for _, name := range regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z]\w*`).FindAllString(string(data), -1) {
			if !slices.ContainsFunc(funcs, func(f string) bool { return strings.HasPrefix(f, name) }) {
				t.Errorf("%s names %s, which no test file defines", doc, name)
			}
		}
	}
	outside := "../" + "shared" // not this file's own mention
	for _, f := range all {
		data, err := os.ReadFile(f)
		if err == nil && (bytes.Contains(data, []byte(outside)) || bytes.Contains(data, []byte("/work/"+"shared"))) {
			t.Errorf("%s names %s, a path outside the repository that users do not have", f, outside)
		}
	}
}

// notInTree are paths the manual names that a run creates.
var notInTree = []string{
	"testdata/var/", // the demo's db (git-ignored)
}

// The API reference and the key table's cross-references stay whole:
// every route the API serves and every metric it exports is in
// docs/api.md, and every section a configuration key's help points at
// ("see "Mass removals"") is a heading of the manual.
func TestDocsCoverTheAPIAndKeys(t *testing.T) {
	api, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	server, err := os.ReadFile("admin/server.go")
	if err != nil {
		t.Fatal(err)
	}
	routes := regexp.MustCompile(`"(GET|POST|DELETE|PUT) (/[^"]*)"`).FindAllStringSubmatch(string(server), -1)
	if len(routes) < 20 {
		t.Fatalf("found %d routes in admin/server.go: has the route table moved?", len(routes))
	}
	param := regexp.MustCompile(`\{(\w+)\}`)
	for _, r := range routes {
		path := param.ReplaceAllString(r[2], ":$1")
		if !strings.Contains(string(api), "`"+r[1]+" "+path) && !strings.Contains(string(api), "`"+r[1]+" "+strings.TrimSuffix(path, "/")) {
			t.Errorf("docs/api.md does not document %s %s", r[1], path)
		}
	}
	metricsSrc, err := os.ReadFile("admin/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	metrics := regexp.MustCompile(`"(cns_[a-z_]+)"`).FindAllStringSubmatch(string(metricsSrc), -1)
	if len(metrics) < 20 {
		t.Fatalf("found %d metrics in admin/metrics.go: have they moved?", len(metrics))
	}
	listed := map[string]bool{}
	for _, m := range metrics {
		if !listed[m[1]] && !regexp.MustCompile("`"+m[1]+"[`{]").Match(api) {
			t.Errorf("docs/api.md does not list the metric %s", m[1])
		}
		listed[m[1]] = true
	}
	var all strings.Builder
	for _, doc := range userDocs(t) {
		data, _ := os.ReadFile(doc)
		all.Write(data)
	}
	var titles []string
	for _, line := range strings.Split(all.String(), "\n") {
		if strings.HasPrefix(line, "#") {
			titles = append(titles, strings.TrimSpace(strings.TrimLeft(line, "#")))
		}
	}
	see := regexp.MustCompile(`see "([^"]+)"`)
	for _, k := range config.Keys {
		for _, m := range see.FindAllStringSubmatch(k.Help+" "+k.Default, -1) {
			if !slices.ContainsFunc(titles, func(h string) bool { return strings.HasPrefix(h, m[1]) }) {
				t.Errorf("key %s points at %q, which is no heading of the manual", k.Name, m[1])
			}
		}
	}
}

// markdownLinks are the targets of a Markdown text's inline links and
// images, outside code.
func markdownLinks(md string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(withoutCode(md), -1) {
		out = append(out, m[1])
	}
	return out
}

// markdownAnchors are the anchors GitHub gives a Markdown text's
// headings: lower case, code marks and punctuation dropped, spaces as
// hyphens, a repeated heading numbered.
func markdownAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(withoutFences(md), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// repoPaths are the repository paths a Markdown text names in code (a
// code span, or a word of a code block): words whose first element is a
// top-level file or directory of the repository. Placeholders (NAME,
// <zone>, …) and absolute paths are not paths of the tree.
func repoPaths(md string) []string {
	top := map[string]bool{}
	entries, _ := os.ReadDir(".")
	for _, e := range entries {
		top[e.Name()] = true
	}
	var words []string
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(withoutFences(md), -1) {
		words = append(words, m[1])
	}
	for _, block := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(md, -1) {
		words = append(words, strings.FieldsFunc(block[1], func(r rune) bool {
			return unicode.IsSpace(r) || strings.ContainsRune(`"'()=;,|<>$`, r)
		})...)
	}
	var out []string
	placeholder := regexp.MustCompile(`[A-Z]{3,}|[<>…{}]|\.\.\.`)
	for _, w := range words {
		w = strings.TrimRight(w, ".:")
		first, _, hasSlash := strings.Cut(w, "/")
		if !top[first] || strings.ContainsAny(w, " \t") || placeholder.MatchString(w) || (!hasSlash && !strings.Contains(w, ".")) {
			continue
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// withoutCode is md with fenced blocks and code spans blanked.
func withoutCode(md string) string {
	return regexp.MustCompile("`[^`\n]*`").ReplaceAllString(withoutFences(md), "")
}

// withoutFences is md without its fenced code blocks.
func withoutFences(md string) string {
	return regexp.MustCompile("(?s)```.*?```").ReplaceAllString(md, "")
}
