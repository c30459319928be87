package sdc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// UFDS directory names (sdc-apis §5.2).
const (
	usersBase     = "ou=users, o=smartdc"
	changelogBase = "cn=changelog"
	latestBase    = "cn=latestchangenumber"
)

// ChangelogPage is how many changelog entries one search asks for (the
// reference's sizeLimit; UFDS answers that many and success).
const ChangelogPage = 1000

// ErrAmbiguousUser means a uuid or login matched more than one account
// (the reference's assert crashed on it).
var ErrAmbiguousUser = errors.New("ufds: more than one account matches")

// ufdsConns is how many connections a UFDS client spreads requests
// over, like the reference's pool (2 to 4): UFDS answers the requests of
// one connection in order.
const ufdsConns = 4

// UFDS is a client of UFDS over LDAP(S) (sdc-apis §5): user lookups and
// the changelog. It keeps a few connections, bound as the configured DN,
// dialled when first needed and again after any failure. It is safe for
// concurrent use.
type UFDS struct {
	url     string
	bindDN  string
	bindPW  string
	tls     *tls.Config
	timeout time.Duration

	next  atomic.Uint32
	mu    sync.Mutex
	conns [ufdsConns]*ldap.Conn
}

// NewUFDS returns a client for opts; it does not connect yet.
func NewUFDS(opts UFDSOptions, timeout time.Duration) (*UFDS, error) {
	u, err := LDAPURL(opts.Address)
	if err != nil {
		return nil, fmt.Errorf("ufds: %w", err)
	}
	tc, err := opts.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("ufds: %w", err)
	}
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	return &UFDS{url: u, bindDN: opts.BindDN, bindPW: opts.BindPassword, tls: tc, timeout: timeout}, nil
}

// Close drops the connections.
func (u *UFDS) Close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, c := range u.conns {
		if c != nil {
			c.Close()
			u.conns[i] = nil
		}
	}
}

// connection returns one of the bound connections, in turn, dialling and
// binding first when it is not there.
func (u *UFDS) connection() (*ldap.Conn, error) {
	i := u.next.Add(1) % ufdsConns
	u.mu.Lock()
	defer u.mu.Unlock()
	if c := u.conns[i]; c != nil && !c.IsClosing() {
		return c, nil
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	c, err := ldap.DialURL(u.url, ldap.DialWithDialer(d), ldap.DialWithTLSConfig(u.tls))
	if err != nil {
		return nil, fmt.Errorf("ufds: %w", err)
	}
	c.SetTimeout(u.timeout)
	if err := c.Bind(u.bindDN, u.bindPW); err != nil {
		c.Close()
		return nil, fmt.Errorf("ufds: bind as %q: %w", u.bindDN, err)
	}
	u.conns[i] = c
	return c, nil
}

// search runs one search, dropping the connection when it failed in a
// way that leaves it unusable. A search that failed on the connection
// itself (reset while idle, say) is tried once more on a fresh one
// (searches are idempotent); the other connections are dropped too, as
// what broke one (UFDS restarted) has most likely broken them all.
func (u *UFDS) search(ctx context.Context, req *ldap.SearchRequest) (*ldap.SearchResult, error) {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var c *ldap.Conn
		if c, err = u.connection(); err != nil {
			return nil, err
		}
		var res *ldap.SearchResult
		res, err = c.Search(req)
		if err != nil && res != nil && ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded) {
			return res, nil // UFDS answers success; a standard server says so
		}
		if err == nil {
			return res, nil
		}
		var le *ldap.Error
		network := !errors.As(err, &le) || le.ResultCode >= ldap.ErrorNetwork || c.IsClosing()
		if network {
			u.Close()
			continue
		}
		if le.ResultCode == ldap.LDAPResultInsufficientAccessRights ||
			le.ResultCode == ldap.LDAPResultUnavailable || le.ResultCode == ldap.LDAPResultBusy {
			u.drop(c)
		}
		break
	}
	return nil, fmt.Errorf("ufds search %s %s: %w", req.BaseDN, req.Filter, err)
}

func (u *UFDS) drop(c *ldap.Conn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := range u.conns {
		if u.conns[i] == c {
			u.conns[i] = nil
		}
	}
	c.Close()
}

// GetUser looks an account up by uuid or login, as CNS does: base
// "ou=users, o=smartdc", scope one, (|(uuid=X)(login=X)). No match is
// ErrNotFound; several are ErrAmbiguousUser.
func (u *UFDS) GetUser(ctx context.Context, uuidOrLogin string) (*dc.User, error) {
	x := ldap.EscapeFilter(uuidOrLogin)
	res, err := u.search(ctx, ldap.NewSearchRequest(usersBase, ldap.ScopeSingleLevel, ldap.NeverDerefAliases,
		0, int(u.timeout/time.Second), false, "(|(uuid="+x+")(login="+x+"))", nil, nil))
	if err != nil {
		return nil, err
	}
	switch len(res.Entries) {
	case 0:
		return nil, fmt.Errorf("ufds: account %q: %w", uuidOrLogin, ErrNotFound)
	case 1:
	default:
		return nil, fmt.Errorf("%w: %q (%d entries)", ErrAmbiguousUser, uuidOrLogin, len(res.Entries))
	}
	usr, err := userFromEntry(res.Entries[0])
	if err != nil {
		return nil, fmt.Errorf("ufds: account %q: %w", uuidOrLogin, err)
	}
	return usr, nil
}

// userFromEntry reads an sdcperson entry's attributes (names in any case,
// values strings, as UFDS stores them).
func userFromEntry(e *ldap.Entry) (*dc.User, error) {
	usr := &dc.User{
		UUID:                    e.GetEqualFoldAttributeValue("uuid"),
		Login:                   e.GetEqualFoldAttributeValue("login"),
		TritonCNSEnabled:        e.GetEqualFoldAttributeValue("triton_cns_enabled"),
		ApprovedForProvisioning: e.GetEqualFoldAttributeValue("approved_for_provisioning"),
	}
	if !dc.IsUUID(usr.UUID) || usr.Login == "" {
		return nil, fmt.Errorf("entry %s has no usable uuid or login", e.DN)
	}
	usr.UUID = strings.ToLower(usr.UUID)
	return usr, nil
}

// LatestChangeNumber reads cn=latestchangenumber's count, as an integer
// (the reference compared strings, and stopped noticing changes when the
// number gained a digit). Scope base works on UFDS and on any LDAP
// server.
func (u *UFDS) LatestChangeNumber(ctx context.Context) (int64, error) {
	res, err := u.search(ctx, ldap.NewSearchRequest(latestBase, ldap.ScopeBaseObject, ldap.NeverDerefAliases,
		0, int(u.timeout/time.Second), false, "(objectclass=*)", []string{"count"}, nil))
	if err != nil {
		return 0, err
	}
	if len(res.Entries) == 0 {
		return 0, fmt.Errorf("ufds: %s: no entry", latestBase)
	}
	v := res.Entries[0].GetEqualFoldAttributeValue("count")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("ufds: %s count %q: not an integer", latestBase, v)
	}
	return n, nil
}

// ChangelogEntry is one UFDS changelog entry.
type ChangelogEntry struct {
	Number     int64
	TargetDN   string
	ChangeType string // add, modify, delete
	// Attrs are the attributes the change touched, lower case: for a
	// modify those of its changes (whatever the operation), for an add
	// or a delete those of the entry.
	Attrs []string
}

// AccountUUID returns the account the entry is about when its target is
// an account itself (uuid=U, ou=users, o=smartdc), not a sub-user, a key
// or anything else.
func (e *ChangelogEntry) AccountUUID() (string, bool) {
	dn, err := ldap.ParseDN(e.TargetDN)
	if err != nil || len(dn.RDNs) != 3 {
		return "", false
	}
	want := [][2]string{{"uuid", ""}, {"ou", "users"}, {"o", "smartdc"}}
	for i, rdn := range dn.RDNs {
		if len(rdn.Attributes) != 1 || !strings.EqualFold(rdn.Attributes[0].Type, want[i][0]) ||
			(want[i][1] != "" && !strings.EqualFold(rdn.Attributes[0].Value, want[i][1])) {
			return "", false
		}
	}
	id := strings.ToLower(dn.RDNs[0].Attributes[0].Value)
	return id, dc.IsUUID(id)
}

// Touches reports whether the change touched any of attrs (lower case).
func (e *ChangelogEntry) Touches(attrs ...string) bool {
	for _, a := range e.Attrs {
		for _, b := range attrs {
			if a == b {
				return true
			}
		}
	}
	return false
}

// ChangesSince returns the changelog entries numbered from..., at most
// limit of them, in number order.
func (u *UFDS) ChangesSince(ctx context.Context, from int64, limit int) ([]ChangelogEntry, error) {
	res, err := u.search(ctx, ldap.NewSearchRequest(changelogBase, ldap.ScopeSingleLevel, ldap.NeverDerefAliases,
		limit, int(u.timeout/time.Second), false, fmt.Sprintf("(changenumber>=%d)", from),
		[]string{"changenumber", "targetdn", "changetype", "changes"}, nil))
	if err != nil {
		return nil, err
	}
	out := make([]ChangelogEntry, 0, len(res.Entries))
	for _, e := range res.Entries {
		ce, err := changelogFromEntry(e)
		if err != nil {
			return nil, err
		}
		if ce.Number >= from {
			out = append(out, ce)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

// changedAttrs reads a changelog entry's "changes": for a modify, an
// array of ldapjs changes {operation, modification: {type, vals}}; for
// an add or delete, the entry as an object of attribute arrays.
func changedAttrs(changes string) []string {
	var list []struct {
		Operation    string `json:"operation"`
		Modification struct {
			Type string `json:"type"`
		} `json:"modification"`
	}
	if json.Unmarshal([]byte(changes), &list) == nil {
		out := make([]string, 0, len(list))
		for _, c := range list {
			out = append(out, strings.ToLower(c.Modification.Type))
		}
		return out
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(changes), &obj) == nil {
		out := make([]string, 0, len(obj))
		for k := range obj {
			out = append(out, strings.ToLower(k))
		}
		sort.Strings(out)
		return out
	}
	return nil
}

// changelogFromEntry reads a changelog entry (changenumber=N, cn=changelog):
// its number as an integer, its target, type and touched attributes.
func changelogFromEntry(e *ldap.Entry) (ChangelogEntry, error) {
	v := e.GetEqualFoldAttributeValue("changenumber")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return ChangelogEntry{}, fmt.Errorf("ufds: changelog entry %s: changenumber %q is not an integer", e.DN, v)
	}
	return ChangelogEntry{
		Number:     n,
		TargetDN:   e.GetEqualFoldAttributeValue("targetdn"),
		ChangeType: e.GetEqualFoldAttributeValue("changetype"),
		Attrs:      changedAttrs(e.GetEqualFoldAttributeValue("changes")),
	}, nil
}
