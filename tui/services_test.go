package tui

import (
	"context"
	"slices"
	"testing"
)

// Ensure "/" on the services finds a service by what the row shows (its
// name, its owner's login) and by what it hides: the owner's UUID, its
// members' aliases and UUIDs.
func TestServicesFilterByNamesAndUUIDs(t *testing.T) {
	views, err := newFake().Services(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := newServicesPage(&Common{Width: 80, Height: 24, Now: now})
	p.Update(servicesLoaded{views})
	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{"", []string{"db", "web"}},
		{"ALICE", []string{"db", "web"}},                          // login, any case
		{"6c96670e-4204", []string{"db", "web"}},                  // owner UUID
		{"web3", []string{"web"}},                                 // a member's alias
		{"db1", []string{"db"}},                                   // another's
		{"b9974d54-9a8f", []string{"db"}},                         // a member's UUID
		{"0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f", []string{"web"}}, // in full
		{"carol", nil},
	} {
		p.table.setFilter(tc.filter)
		var got []string
		for _, r := range p.table.shown {
			got = append(got, r.cells[0])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("filter %q shows %v, want %v", tc.filter, got, tc.want)
		}
	}
}
