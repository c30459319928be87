package main

import (
	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/serve"
)

// The config package must not import serve (only main does), so it has
// its own plain types for the DNS server's sections; these are the only
// conversions. RRL and propagation have serve's fields one for one, so a
// field added on either side fails to compile here.

func serveRRL(r config.RRL) serve.RRL { return serve.RRL(r) }

func servePropagation(p config.Propagation) serve.PropagationPolicy {
	return serve.PropagationPolicy(p)
}

// serveForwarding leaves MaxTTL to serve's default: no key sets it.
func serveForwarding(f config.Forwarding) serve.Forwarding {
	return serve.Forwarding{Clients: f.Clients, Upstreams: f.Upstreams, CacheEntries: f.CacheEntries, Timeout: f.Timeout}
}

// serveClientAnswers: the networks are the updater's business (they pick
// the addresses it commits); serve needs to know only that it is on.
func serveClientAnswers(c config.ClientAnswers) serve.ClientAnswers {
	out := serve.ClientAnswers{Enabled: len(c.Networks) > 0}
	for _, a := range c.Listen {
		out.Listen = append(out.Listen, a.String())
	}
	return out
}
