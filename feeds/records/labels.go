package records

import (
	"errors"
	"fmt"
	"strings"
)

// Limits of RFC 1035 names, counted in octets of the text form without the
// trailing dot.
const (
	maxLabel = 63
	maxName  = 253
)

// cleanLabel turns free text (an alias, a login, a network name) into one
// DNS label the way the reference's dnsify does: lower case, and every run
// of characters outside [a-z0-9-] becomes a single "-". Unlike the
// reference it then trims "-" from both ends, and it refuses a result that
// is empty or longer than a label may be, instead of publishing a name no
// resolver accepts.
func cleanLabel(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	run := false // inside a run of replaced characters
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-' {
			b.WriteByte(c)
			run = false
			continue
		}
		// Bytes of a multi-byte UTF-8 character are all outside the set,
		// so the whole character becomes one "-" as in JavaScript.
		if !run {
			b.WriteByte('-')
			run = true
		}
	}
	l := strings.Trim(b.String(), "-")
	switch {
	case l == "":
		return "", fmt.Errorf("%q has no letters or digits", s)
	case len(l) > maxLabel:
		return "", fmt.Errorf("%q is longer than %d octets once cleaned", s, maxLabel)
	}
	return l, nil
}

// checkLabel reports whether s is a host-name label: 1 to 63 of [a-z0-9-],
// neither starting nor ending with "-". Callers lower-case first.
func checkLabel(s string) error {
	switch {
	case s == "":
		return errors.New("empty label")
	case len(s) > maxLabel:
		return fmt.Errorf("label %q is longer than %d octets", s, maxLabel)
	case s[0] == '-' || s[len(s)-1] == '-':
		return fmt.Errorf("label %q starts or ends with \"-\"", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z') && !('0' <= c && c <= '9') && c != '-' {
			return fmt.Errorf("label %q has the character %q", s, c)
		}
	}
	return nil
}

// checkHostName checks a dotted name label by label and as a whole.
func checkHostName(s string) error {
	if len(s) > maxName {
		return fmt.Errorf("name is longer than %d octets", maxName)
	}
	for _, l := range strings.Split(s, ".") {
		if err := checkLabel(l); err != nil {
			return err
		}
	}
	return nil
}
