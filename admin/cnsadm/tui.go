package cnsadm

import (
	"context"
	"time"

	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/tui"
)

// TUICmd is cnsadm tui.
type TUICmd struct {
	DB      string        `name:"db" type:"existingfile" help:"Show a db file offline, read-only, instead of a running cns."`
	Refresh time.Duration `default:"1s" help:"How often to read the API again (backing off to 10s while it fails)."`
}

func (c TUICmd) Run(a *Cmd) error { return a.RunTUI(c.DB, c.Refresh) }

// RunTUI runs the terminal UI over the API a talks to, or over the db
// file at dbPath, read-only, when it is set (cns tui runs it too).
func (a *Cmd) RunTUI(dbPath string, refresh time.Duration) error {
	var src tui.Source
	if dbPath != "" {
		s, err := a.OpenDB(dbPath)
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
