package sdc

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
)

// The reference's *_opts configuration keys, as config-agent renders them
// from SAPI (sdc-apis §6). Addresses are bare host names there ("vmapi.
// coal.joyent.us"); a full URL ("http://127.0.0.1:8080", as `cns sim`
// prints) is accepted too.

// VMAPIOptions is vmapi_opts.
type VMAPIOptions struct {
	Address string `json:"address"`
	// Limit is the page size of full listings (SAPI's vmapi_limit, 500 by
	// default; VMAPI refuses more than 1000).
	Limit int `json:"limit"`
}

// APIOptions is cnapi_opts or napi_opts.
type APIOptions struct {
	Address string `json:"address"`
}

// UFDSOptions is ufds_opts.
type UFDSOptions struct {
	Address      string `json:"address"`
	BindDN       string `json:"bindDN"`
	BindPassword string `json:"bindPassword"`
	// CAFile, a cns key, is a PEM file of certificates to verify UFDS's
	// LDAPS certificate against. Without it the certificate is not
	// verified, as CNS never did (UFDS's is self-signed at zone setup).
	CAFile string `json:"ca_file"`
}

// ChangefeedOptions is changefeed_opts.
type ChangefeedOptions struct {
	Resource     string   `json:"resource"`
	SubResources []string `json:"subResources"`
	// Instance identifies this listener to the publisher (SAPI's
	// INSTANCE_UUID): a second registration with the same instance
	// replaces the first.
	Instance string `json:"instance"`
}

// DefaultSubResources are the VM keys CNS registers for (SAPI's default).
var DefaultSubResources = []string{
	"alias", "customer_metadata", "destroyed", "internal_metadata", "nics",
	"owner_uuid", "server_uuid", "state", "tags",
}

// Defaults and limits of the options.
const (
	DefaultVMAPILimit = 500
	MaxVMAPILimit     = 1000 // VMAPI answers 409 above this
)

// OptionError names the configuration key at fault.
type OptionError struct {
	Key, Problem string
}

func (e *OptionError) Error() string { return e.Key + ": " + e.Problem }

// Endpoints are the five option keys, decoded and checked.
type Endpoints struct {
	VMAPI      VMAPIOptions
	CNAPI      APIOptions
	NAPI       APIOptions
	UFDS       UFDSOptions
	Changefeed ChangefeedOptions
}

// ParseEndpoints decodes the raw vmapi_opts, cnapi_opts, napi_opts,
// ufds_opts and changefeed_opts values and checks them. Missing
// changefeed values take SAPI's defaults; a vmapi_opts.limit above 1000
// is lowered to 1000 rather than failing every page (the reference's
// hazard).
func ParseEndpoints(vmapi, cnapi, napi, ufds, changefeed json.RawMessage) (Endpoints, error) {
	var e Endpoints
	for _, k := range []struct {
		key  string
		raw  json.RawMessage
		into any
	}{
		{"vmapi_opts", vmapi, &e.VMAPI}, {"cnapi_opts", cnapi, &e.CNAPI}, {"napi_opts", napi, &e.NAPI},
		{"ufds_opts", ufds, &e.UFDS}, {"changefeed_opts", changefeed, &e.Changefeed},
	} {
		if len(k.raw) == 0 || string(k.raw) == "null" {
			if k.key == "changefeed_opts" {
				continue
			}
			return e, &OptionError{k.key, "required when inventory_file is not set"}
		}
		if err := json.Unmarshal(k.raw, k.into); err != nil {
			return e, &OptionError{k.key, err.Error()}
		}
	}
	if _, err := HTTPURL(e.VMAPI.Address); err != nil {
		return e, &OptionError{"vmapi_opts.address", err.Error()}
	}
	if _, err := HTTPURL(e.CNAPI.Address); err != nil {
		return e, &OptionError{"cnapi_opts.address", err.Error()}
	}
	if _, err := HTTPURL(e.NAPI.Address); err != nil {
		return e, &OptionError{"napi_opts.address", err.Error()}
	}
	if _, err := LDAPURL(e.UFDS.Address); err != nil {
		return e, &OptionError{"ufds_opts.address", err.Error()}
	}
	switch {
	case e.VMAPI.Limit < 0:
		return e, &OptionError{"vmapi_opts.limit", "must be positive"}
	case e.VMAPI.Limit == 0:
		e.VMAPI.Limit = DefaultVMAPILimit
	case e.VMAPI.Limit > MaxVMAPILimit:
		e.VMAPI.Limit = MaxVMAPILimit
	}
	if e.UFDS.CAFile != "" {
		if _, err := e.UFDS.TLSConfig(); err != nil {
			return e, &OptionError{"ufds_opts.ca_file", err.Error()}
		}
	}
	if e.Changefeed.Resource == "" {
		e.Changefeed.Resource = "vm"
	}
	if e.Changefeed.Resource != "vm" {
		return e, &OptionError{"changefeed_opts.resource", fmt.Sprintf("%q: only \"vm\" is supported", e.Changefeed.Resource)}
	}
	if len(e.Changefeed.SubResources) == 0 {
		e.Changefeed.SubResources = DefaultSubResources
	}
	if e.Changefeed.Instance == "" {
		// SAPI always renders INSTANCE_UUID; a hand-written config may
		// not, and the publisher needs some identity.
		host, _ := os.Hostname()
		e.Changefeed.Instance = "cns-" + host
	}
	return e, nil
}

// HTTPURL turns an *_opts address into a base URL: a bare host (or
// host:port) becomes http://host, as CNS does; an http or https URL is
// taken as it is.
func HTTPURL(address string) (*url.URL, error) {
	if address == "" {
		return nil, fmt.Errorf("empty address")
	}
	if !strings.Contains(address, "://") {
		address = "http://" + address
	}
	u, err := url.Parse(address)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: want a host name or an http(s) URL", address)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q: no host", address)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

// LDAPURL turns ufds_opts.address into an LDAP URL: a bare host becomes
// ldaps://host:636, as CNS does; ldap:// and ldaps:// URLs get their
// default port when they name none.
func LDAPURL(address string) (string, error) {
	if address == "" {
		return "", fmt.Errorf("empty address")
	}
	if !strings.Contains(address, "://") {
		address = "ldaps://" + address
	}
	u, err := url.Parse(address)
	if err != nil {
		return "", err
	}
	port := map[string]string{"ldap": "389", "ldaps": "636"}[u.Scheme]
	if port == "" {
		return "", fmt.Errorf("%q: want a host name or an ldap(s) URL", address)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("%q: no host", address)
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	return u.Scheme + "://" + u.Host, nil
}

// TLSConfig is how cns checks UFDS's LDAPS certificate: against CAFile
// when set, not at all otherwise (rejectUnauthorized: false, like CNS).
func (o UFDSOptions) TLSConfig() (*tls.Config, error) {
	if o.CAFile == "" {
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, nil //nolint:gosec // UFDS's certificate is self-signed; CNS never verified it
	}
	pem, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", o.CAFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
