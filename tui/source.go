package tui

import "github.com/tritondatacenter/cns/admin"

// Source is where the UI reads from: admin's read model, over a running
// cns (admin.APIModel) or a db file offline (admin.DBModel). The pages
// call it only from tea.Cmds, never from Update or View.
type Source = admin.ReadModel
