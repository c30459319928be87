// Package cnsadm is the operator's tool, in one place: its verbs (Cmd,
// the command line of the binary invoked as cnsadm and of `cns adm`),
// what they print (the reference cnsadm's layouts, which scripts parse),
// where they change the configuration (a config file, or SAPI in an SDC
// zone: Store, Editor) and cnsadm(1), which ManPage builds from the
// verbs' own help (go generate writes it to smf/man/cnsadm.1).
//
// It reads a running cns through admin's Go client, and validates every
// edit with admin/config's parser before it writes anything.
package cnsadm

//go:generate sh -c "go run ../.. adm man > ../../smf/man/cnsadm.1"
