package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tritondatacenter/cns/admin/config"
	"github.com/tritondatacenter/cns/feeds/sdc/sdcsim"
	"github.com/tritondatacenter/cns/smf"
)

// SimCmd runs the SDC simulator as a process: `cns sim --inventory FILE`
// prints, as the first line of its stdout, the config keys that point
// cns serve at it, then turns every edit of FILE into API changes until
// it is killed.
type SimCmd struct {
	Inventory string `required:"" type:"existingfile" help:"Inventory file (the inventory_file format) to simulate; edits to it become VMAPI, changefeed, CNAPI, NAPI and UFDS changes."`
	LogLevel  string `default:"info" enum:"trace,debug,info,warn,error" help:"Log level (${enum})."`
}

func (c *SimCmd) Run() error {
	level := new(slog.LevelVar)
	l, _ := config.ParseLogLevel(c.LogLevel)
	level.Set(l)
	log := slog.New(smf.NewBunyanHandler(os.Stderr, "cns-sim", level))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return sdcsim.Run(ctx, c.Inventory, os.Stdout, log)
}
