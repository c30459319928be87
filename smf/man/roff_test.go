package man

import "testing"

// What roff would misread is escaped: backslashes, a leading dot or quote,
// minus signs in words, characters outside ASCII; Markdown code spans are
// bold, unhyphenated words.
func TestEscapes(t *testing.T) {
	for _, tc := range []struct {
		name, got, want string
	}{
		{"word", Word(`--db-path\x`), `\-\-db\-path\ex`},
		{"text dot", Text(".not a request\n'nor this"), "\\&.not a request\n\\&'nor this"},
		{"text keeps hyphens", Text("opted-in"), "opted-in"},
		{"non-ASCII", Text("BIND ≥ 9.18 → ok"), `BIND \[u2265] 9.18 \[u2192] ok`},
		{"markdown code", Markdown("with `use-login` set"), `with \fB\%use\-login\fR set`},
		{"markdown unpaired", Markdown("a ` alone"), "a ` alone"},
		{"markdown leading dot", Markdown(".x `y`"), `\&.x \fB\%y\fR`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}
