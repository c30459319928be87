package sdcsim

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/tritondatacenter/cns/feeds/dc"
)

func dialLDAP(t *testing.T, s *Sim, bind bool) *ldap.Conn {
	t.Helper()
	c, err := ldap.DialURL(s.LDAPURL())
	if err != nil {
		t.Fatalf("dial %s: %v", s.LDAPURL(), err)
	}
	t.Cleanup(func() { c.Close() })
	if bind {
		if err := c.Bind(s.RootDN(), s.RootPassword()); err != nil {
			t.Fatalf("bind: %v", err)
		}
	}
	return c
}

func search(t *testing.T, c *ldap.Conn, base string, scope int, filter string, sizeLimit int) []*ldap.Entry {
	t.Helper()
	res, err := c.Search(ldap.NewSearchRequest(base, scope, ldap.NeverDerefAliases, sizeLimit, 0, false, filter, nil, nil))
	if err != nil {
		t.Fatalf("search %s %s: %v", base, filter, err)
	}
	return res.Entries
}

func TestLDAPBind(t *testing.T) {
	s := startSim(t, Options{})
	c := dialLDAP(t, s, false)
	err := c.Bind("cn=root", "wrong")
	if !ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
		t.Fatalf("bad password: %v, want invalidCredentials", err)
	}
	if _, err := c.Search(ldap.NewSearchRequest("ou=users, o=smartdc", ldap.ScopeSingleLevel, 0, 0, 0, false,
		"(objectclass=*)", nil, nil)); !ldap.IsErrorWithCode(err, ldap.LDAPResultInsufficientAccessRights) {
		t.Fatalf("search unbound: %v", err)
	}
	if err := c.Bind("cn=root", "secret"); err != nil {
		t.Fatalf("good bind: %v", err)
	}

	s.SetFault(RouteLDAPBind, Fault{Times: 1, LDAPResult: ldap.LDAPResultUnavailable})
	if err := c.Bind("cn=root", "secret"); !ldap.IsErrorWithCode(err, ldap.LDAPResultUnavailable) {
		t.Fatalf("bind with fault: %v", err)
	}
	if err := c.Bind("cn=root", "secret"); err != nil {
		t.Fatalf("bind after the fault: %v", err)
	}
}

func TestLDAPUserSearch(t *testing.T) {
	s := startSim(t, Options{})
	c := dialLDAP(t, s, true)
	for _, f := range []string{
		"(|(uuid=" + ownerA + ")(login=" + ownerA + "))",
		"(|(uuid=alice)(login=alice))",
		"(&(objectclass=sdcperson)(login=alice))",
		"(login=ALICE)",
		"(login=al*)",
	} {
		entries := search(t, c, "ou=users, o=smartdc", ldap.ScopeSingleLevel, f, 0)
		if len(entries) != 1 {
			t.Fatalf("%s: %d entries", f, len(entries))
		}
		e := entries[0]
		if e.DN != "uuid="+ownerA+", ou=users, o=smartdc" || e.GetAttributeValue("login") != "alice" ||
			e.GetAttributeValue("triton_cns_enabled") != "true" || e.GetAttributeValue("approved_for_provisioning") != "true" ||
			e.GetAttributeValue("objectclass") != "sdcperson" {
			t.Errorf("%s: %s %v", f, e.DN, e.Attributes)
		}
	}
	if got := search(t, c, "ou=users,o=smartdc", ldap.ScopeSingleLevel, "(login=nobody)", 0); len(got) != 0 {
		t.Errorf("missing user: %d entries", len(got))
	}
	if got := search(t, c, "ou=users, o=smartdc", ldap.ScopeSingleLevel, "(objectclass=sdcperson)", 0); len(got) != 2 {
		t.Errorf("all users: %d entries", len(got))
	}
	_, err := c.Search(ldap.NewSearchRequest("ou=nothing, o=smartdc", ldap.ScopeSingleLevel, 0, 0, 0, false, "(objectclass=*)", nil, nil))
	if !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		t.Errorf("unknown base: %v", err)
	}
}

func latest(t *testing.T, c *ldap.Conn, scope int) int {
	t.Helper()
	entries := search(t, c, "cn=latestchangenumber", scope, "(objectclass=*)", 0)
	if len(entries) != 1 {
		t.Fatalf("latestchangenumber scope %d: %d entries", scope, len(entries))
	}
	n, err := strconv.Atoi(entries[0].GetAttributeValue("count"))
	if err != nil {
		t.Fatalf("count %q: %v", entries[0].GetAttributeValue("count"), err)
	}
	return n
}

func TestLDAPChangelog(t *testing.T) {
	s := startSim(t, Options{})
	c := dialLDAP(t, s, true)
	for _, scope := range []int{ldap.ScopeBaseObject, ldap.ScopeSingleLevel, ldap.ScopeWholeSubtree} {
		if n := latest(t, c, scope); n != 0 {
			t.Fatalf("fresh latestchangenumber = %d", n)
		}
	}

	if err := s.SetUserFlag(ownerB, "triton_cns_enabled", "true"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddUser(dc.User{UUID: vmID(100), Login: "carol"}); err != nil {
		t.Fatal(err)
	}
	if n := latest(t, c, ldap.ScopeSingleLevel); n != 2 {
		t.Fatalf("latestchangenumber = %d, want 2", n)
	}

	entries := search(t, c, "cn=changelog", ldap.ScopeSingleLevel, "(changenumber>=1)", 1000)
	if len(entries) != 2 {
		t.Fatalf("changelog: %d entries", len(entries))
	}
	mod := entries[0]
	if mod.DN != "changenumber=1, cn=changelog" || mod.GetAttributeValue("changetype") != "modify" ||
		mod.GetAttributeValue("targetdn") != "uuid="+ownerB+", ou=users, o=smartdc" ||
		mod.GetAttributeValue("objectclass") != "changeLogEntry" || mod.GetAttributeValue("changetime") == "" {
		t.Fatalf("modify entry: %s %v", mod.DN, mod.Attributes)
	}
	var changes []struct {
		Operation    string `json:"operation"`
		Modification struct {
			Type string   `json:"type"`
			Vals []string `json:"vals"`
		} `json:"modification"`
	}
	if err := json.Unmarshal([]byte(mod.GetAttributeValue("changes")), &changes); err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Operation != "replace" || changes[0].Modification.Type != "triton_cns_enabled" ||
		len(changes[0].Modification.Vals) != 1 || changes[0].Modification.Vals[0] != "true" {
		t.Fatalf("changes %+v", changes)
	}
	if add := entries[1]; add.GetAttributeValue("changetype") != "add" || add.GetAttributeValue("changenumber") != "2" {
		t.Fatalf("add entry %v", add.Attributes)
	}

	// changenumber compares as an integer, past a digit rollover, and
	// sizeLimit caps the answer.
	if err := s.SetChangeNumber(9); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.SetUserFlag(ownerA, "approved_for_provisioning", "false"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetUserFlag(ownerA, "approved_for_provisioning", "true"); err != nil {
			t.Fatal(err)
		}
	}
	entries = search(t, c, "cn=changelog", ldap.ScopeSingleLevel, "(changenumber>=9)", 0)
	if len(entries) != 6 || entries[0].GetAttributeValue("changenumber") != "10" {
		t.Fatalf("after rollover: %d entries, first %v", len(entries), entries[0].Attributes)
	}
	entries = search(t, c, "cn=changelog", ldap.ScopeSingleLevel, "(changenumber>=2)", 3)
	if len(entries) != 3 || entries[0].GetAttributeValue("changenumber") != "2" || entries[2].GetAttributeValue("changenumber") != "11" {
		t.Fatalf("sizeLimit 3: %d entries", len(entries))
	}
}

func TestLDAPS(t *testing.T) {
	s := startSim(t, Options{})
	c, err := ldap.DialURL(s.LDAPSURL(), ldap.DialWithTLSConfig(s.ClientTLSConfig()))
	if err != nil {
		t.Fatalf("dial %s: %v", s.LDAPSURL(), err)
	}
	defer c.Close()
	if err := c.Bind("cn=root", "secret"); err != nil {
		t.Fatalf("bind over LDAPS: %v", err)
	}
	if got := search(t, c, "ou=users, o=smartdc", ldap.ScopeSingleLevel, "(uuid="+ownerB+")", 0); len(got) != 1 {
		t.Fatalf("search over LDAPS: %d entries", len(got))
	}
	// Without the CA the certificate does not verify.
	if c2, err := ldap.DialURL(s.LDAPSURL()); err == nil {
		err = c2.Bind("cn=root", "secret")
		c2.Close()
		if err == nil {
			t.Fatal("LDAPS verified without the simulator's CA")
		}
	}
}

func TestLDAPDown(t *testing.T) {
	s := startSim(t, Options{})
	c := dialLDAP(t, s, true)
	url := s.LDAPURL()
	if err := s.SetLDAPDown(true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Search(ldap.NewSearchRequest("cn=latestchangenumber", 0, 0, 0, 0, false, "(objectclass=*)", nil, nil)); err == nil {
		t.Fatal("search on a reset connection succeeded")
	}
	if c2, err := ldap.DialURL(url); err == nil {
		c2.Close()
		t.Fatal("dial while down succeeded")
	}
	if err := s.SetLDAPDown(false); err != nil {
		t.Fatal(err)
	}
	if s.LDAPURL() != url {
		t.Fatalf("came back on %s, was %s", s.LDAPURL(), url)
	}
	c = dialLDAP(t, s, true)
	if latest(t, c, ldap.ScopeBaseObject) != 0 {
		t.Fatal("latestchangenumber after coming back")
	}
	if n := s.ResetLDAPConns(); n != 1 {
		t.Fatalf("ResetLDAPConns = %d", n)
	}
	_, err := c.Search(ldap.NewSearchRequest("cn=latestchangenumber", 0, 0, 0, 0, false, "(objectclass=*)", nil, nil))
	if err == nil {
		t.Fatal("search on a reset connection succeeded")
	}
}
