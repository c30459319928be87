package main

import (
	"github.com/tritondatacenter/cns/admin"
	"github.com/tritondatacenter/cns/serve"
)

// openDBModel opens a db file, read-only, as the offline read model; the
// peers in it are in the DNS server's stored form.
func openDBModel(path string) (*admin.DBModel, error) {
	return admin.OpenDB(path, serve.StoredPeerStatus)
}
