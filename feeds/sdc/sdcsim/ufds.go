package sdcsim

import (
	"slices"
	"strconv"
	"strings"

	ber "github.com/go-asn1-ber/asn1-ber"
)

// The UFDS directory as LDAP sees it (sdc-apis §5): accounts under
// "ou=users, o=smartdc", the changelog under "cn=changelog", and the two
// special entries "cn=latestchangenumber" and "cn=changelogcount", which
// UFDS answers for any scope and filter.

type ldapAttr struct {
	name string
	vals []string
}

type ldapEntry struct {
	dn    string
	attrs []ldapAttr
}

func (e *ldapEntry) values(attr string) []string {
	for _, a := range e.attrs {
		if strings.EqualFold(a.name, attr) {
			return a.vals
		}
	}
	return nil
}

// normDN canonicalizes a DN for comparison: lower case, no spaces around
// separators. UFDS writes "uuid=x, ou=users, o=smartdc"; clients may not.
func normDN(dn string) string {
	parts := strings.Split(dn, ",")
	for i, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			parts[i] = strings.ToLower(strings.TrimSpace(p))
			continue
		}
		parts[i] = strings.ToLower(strings.TrimSpace(k)) + "=" + strings.ToLower(strings.TrimSpace(v))
	}
	return strings.Join(parts, ",")
}

const (
	scopeBase = 0
	scopeOne  = 1
	scopeSub  = 2
)

// userLDAPEntry is the account as LDAP returns it, built once per
// version of the account (searches run over every account).
func userLDAPEntry(e *userEntry) ldapEntry {
	if e.entry != nil {
		return *e.entry
	}
	out := ldapEntry{dn: e.dn()}
	// objectclass first, then uuid and login, then the rest by name.
	order := []string{"objectclass", "uuid", "login"}
	for name := range e.attrs {
		if !slices.Contains(order, name) {
			order = append(order, name)
		}
	}
	slices.Sort(order[3:])
	for _, name := range order {
		if v, ok := e.attrs[name]; ok {
			out.attrs = append(out.attrs, ldapAttr{name, slices.Clone(v)})
		}
	}
	e.entry = &out
	return out
}

func changelogLDAPEntry(c *ChangelogEntry) ldapEntry {
	n := strconv.Itoa(c.Number)
	e := ldapEntry{dn: "changenumber=" + n + ", cn=changelog", attrs: []ldapAttr{
		{"changenumber", []string{n}},
		{"targetdn", []string{c.TargetDN}},
		{"changetype", []string{c.ChangeType}},
		{"objectclass", []string{"changeLogEntry"}},
		{"changetime", []string{c.ChangeTime}},
		{"changes", []string{c.Changes}},
	}}
	if c.Entry != "" {
		e.attrs = append(e.attrs, ldapAttr{"entry", []string{c.Entry}})
	}
	return e
}

// searchDirectory returns the entries a search selects, in UFDS order
// (changelog ascending by number), or an LDAP result code for a base that
// does not exist.
func (s *Sim) searchDirectory(base string, scope int64, filter *ber.Packet) ([]ldapEntry, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nb := normDN(base)
	var candidates []ldapEntry
	special := false
	switch {
	case nb == "cn=latestchangenumber":
		special = true
		candidates = []ldapEntry{{dn: "cn=latestchangenumber", attrs: []ldapAttr{
			{"objectclass", []string{"latestchangenumber"}},
			{"cn", []string{"latestchangenumber"}},
			{"count", []string{strconv.Itoa(s.latestChangeLocked())}},
		}}}
	case nb == "cn=changelogcount":
		special = true
		candidates = []ldapEntry{{dn: "cn=changelogcount", attrs: []ldapAttr{
			{"objectclass", []string{"changelogcount"}},
			{"cn", []string{"changelogcount"}},
			{"count", []string{strconv.Itoa(len(s.changelog))}},
		}}}
	case nb == "cn=changelog":
		if scope == scopeBase {
			candidates = []ldapEntry{{dn: "cn=changelog", attrs: []ldapAttr{{"objectclass", []string{"top"}}, {"cn", []string{"changelog"}}}}}
			break
		}
		for i := range s.changelog {
			candidates = append(candidates, changelogLDAPEntry(&s.changelog[i]))
		}
	case nb == "":
		if scope == scopeBase {
			candidates = []ldapEntry{{dn: "", attrs: []ldapAttr{
				{"objectclass", []string{"top"}},
				{"namingcontexts", []string{"o=smartdc"}},
				{"supportedldapversion", []string{"3"}},
			}}}
		}
	case nb == "o=smartdc", nb == "ou=users,o=smartdc":
		org := ldapEntry{dn: "o=smartdc", attrs: []ldapAttr{{"objectclass", []string{"organization"}}, {"o", []string{"smartdc"}}}}
		ou := ldapEntry{dn: "ou=users, o=smartdc", attrs: []ldapAttr{{"objectclass", []string{"organizationalunit"}}, {"ou", []string{"users"}}}}
		var users []ldapEntry
		for _, u := range s.userOrder {
			users = append(users, userLDAPEntry(s.users[u]))
		}
		switch {
		case nb == "o=smartdc" && scope == scopeBase:
			candidates = []ldapEntry{org}
		case nb == "o=smartdc" && scope == scopeOne:
			candidates = []ldapEntry{ou}
		case nb == "o=smartdc":
			candidates = append([]ldapEntry{org, ou}, users...)
		case scope == scopeBase:
			candidates = []ldapEntry{ou}
		case scope == scopeOne:
			candidates = users
		default:
			candidates = append([]ldapEntry{ou}, users...)
		}
	default:
		var found *userEntry
		for _, u := range s.userOrder {
			if normDN(userDN(u)) == nb {
				found = s.users[u]
			}
		}
		if found == nil {
			return nil, resultNoSuchObject, nil
		}
		if scope != scopeOne { // accounts have no children here (no sub-users)
			candidates = []ldapEntry{userLDAPEntry(found)}
		}
	}
	if special {
		// UFDS's special handler answers whatever the scope and filter.
		return candidates, resultSuccess, nil
	}
	var out []ldapEntry
	for i := range candidates {
		ok, err := matchFilter(filter, &candidates[i])
		if err != nil {
			return nil, resultProtocolError, err
		}
		if ok {
			out = append(out, candidates[i])
		}
	}
	return out, resultSuccess, nil
}

// LDAP filter choices (RFC 4511 4.5.1), context-specific tags.
const (
	filterAnd             = 0
	filterOr              = 1
	filterNot             = 2
	filterEquality        = 3
	filterSubstrings      = 4
	filterGreaterOrEqual  = 5
	filterLessOrEqual     = 6
	filterPresent         = 7
	filterApproxMatch     = 8
	filterExtensibleMatch = 9
)

// integerAttrs compare as numbers, as UFDS rewrites changenumber to moray's
// numeric _id.
var integerAttrs = []string{"changenumber", "count"}

func compareValues(attr, a, b string) int {
	if slices.ContainsFunc(integerAttrs, func(x string) bool { return strings.EqualFold(x, attr) }) {
		x, errA := strconv.ParseInt(a, 10, 64)
		y, errB := strconv.ParseInt(b, 10, 64)
		if errA == nil && errB == nil {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	return compareFold(a, b)
}

// compareFold orders two strings ignoring case, without allocating for
// ASCII (every search compares each value of every account).
func compareFold(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if x >= 0x80 || y >= 0x80 {
			return strings.Compare(strings.ToLower(a[i:]), strings.ToLower(b[i:]))
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

type filterError string

func (e filterError) Error() string { return "sdcsim: bad LDAP filter: " + string(e) }

// matchFilter evaluates an LDAP filter on an entry. Attribute names and
// string values compare case-insensitively (caseIgnoreMatch).
func matchFilter(f *ber.Packet, e *ldapEntry) (bool, error) {
	if f == nil || f.ClassType != ber.ClassContext {
		return false, filterError("not a filter choice")
	}
	pair := func() (string, string, error) {
		if len(f.Children) != 2 {
			return "", "", filterError("want attribute and value")
		}
		return f.Children[0].Data.String(), f.Children[1].Data.String(), nil
	}
	switch f.Tag {
	case filterAnd, filterOr:
		for _, c := range f.Children {
			ok, err := matchFilter(c, e)
			if err != nil {
				return false, err
			}
			if ok == (f.Tag == filterOr) {
				return ok, nil
			}
		}
		return f.Tag == filterAnd, nil
	case filterNot:
		if len(f.Children) != 1 {
			return false, filterError("not wants one filter")
		}
		ok, err := matchFilter(f.Children[0], e)
		return !ok, err
	case filterEquality, filterApproxMatch, filterGreaterOrEqual, filterLessOrEqual:
		attr, val, err := pair()
		if err != nil {
			return false, err
		}
		for _, v := range e.values(attr) {
			c := compareValues(attr, v, val)
			if f.Tag == filterGreaterOrEqual && c >= 0 ||
				f.Tag == filterLessOrEqual && c <= 0 ||
				(f.Tag == filterEquality || f.Tag == filterApproxMatch) && c == 0 {
				return true, nil
			}
		}
		return false, nil
	case filterPresent:
		attr := f.Data.String()
		return strings.EqualFold(attr, "objectclass") || e.values(attr) != nil, nil
	case filterSubstrings:
		if len(f.Children) != 2 {
			return false, filterError("substrings wants attribute and parts")
		}
		attr := f.Children[0].Data.String()
		for _, v := range e.values(attr) {
			if matchSubstrings(strings.ToLower(v), f.Children[1].Children) {
				return true, nil
			}
		}
		return false, nil
	case filterExtensibleMatch:
		return false, nil
	default:
		return false, filterError("unknown filter choice " + strconv.Itoa(int(f.Tag)))
	}
}

func matchSubstrings(v string, parts []*ber.Packet) bool {
	for _, p := range parts {
		s := strings.ToLower(p.Data.String())
		switch p.Tag {
		case 0: // initial
			if !strings.HasPrefix(v, s) {
				return false
			}
			v = v[len(s):]
		case 1: // any
			i := strings.Index(v, s)
			if i < 0 {
				return false
			}
			v = v[i+len(s):]
		case 2: // final
			if !strings.HasSuffix(v, s) {
				return false
			}
			v = ""
		}
	}
	return true
}
