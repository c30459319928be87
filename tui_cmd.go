package main

import (
	"time"

	"github.com/tritondatacenter/cns/admin/cnsadm"
)

// TUICmd is `cns tui`: the operator's live view of a running cns (its
// API), or of a db file offline.
type TUICmd struct {
	API        string        `name:"api" env:"CNS_API" help:"API of the cns to watch (default: api_server.listen in --config-file)."`
	Token      string        `name:"token" env:"CNS_API_TOKEN" help:"Bearer token for the API."`
	ConfigFile string        `name:"config-file" env:"CNS_CONFIG" default:"/opt/triton/cns/etc/config.json" help:"The server's config file (for the API's address)."`
	DB         string        `name:"db" type:"existingfile" help:"Show a db file offline, read-only, instead of a running cns."`
	Refresh    time.Duration `default:"1s" help:"How often to read the API again (backing off to 10s while it fails)."`
}

func (c TUICmd) Run() error {
	adm := cnsadm.Cmd{API: c.API, Token: c.Token, ConfigFile: c.ConfigFile, OpenDB: openDBModel}
	return adm.RunTUI(c.DB, c.Refresh)
}
