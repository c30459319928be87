package main

import (
	"context"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/tui"
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
	adm := AdmCmd{API: c.API, Token: c.Token, ConfigFile: c.ConfigFile}
	return runTUI(&adm, c.DB, c.Refresh)
}

// AdmTUICmd is `cnsadm tui`.
type AdmTUICmd struct {
	DB      string        `name:"db" type:"existingfile" help:"Show a db file offline, read-only, instead of a running cns."`
	Refresh time.Duration `default:"1s" help:"How often to read the API again (backing off to 10s while it fails)."`
}

func (c AdmTUICmd) Run(a *AdmCmd) error { return runTUI(a, c.DB, c.Refresh) }

func runTUI(a *AdmCmd, dbPath string, refresh time.Duration) error {
	var src tui.Source
	if dbPath != "" {
		s, err := openDBModel(dbPath)
		if err != nil {
			return err
		}
		defer s.Close()
		src = s
	} else {
		src = admin.APIModel{Client: a.client()}
	}
	return tui.Run(context.Background(), src, tui.Options{Refresh: refresh})
}
