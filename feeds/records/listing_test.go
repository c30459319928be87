package records

import (
	"slices"
	"testing"

	"github.com/tritondatacenter/cns/feeds/dc"
)

// svc and ports build expected services; ports take the default SRV
// priority and weight.
func svc(name string, ports ...uint16) Service {
	s := Service{Name: name}
	for _, p := range ports {
		s.Ports = append(s.Ports, Port{Port: p, Priority: defaultPriority, Weight: defaultWeight})
	}
	return s
}

type listingCase struct {
	name         string
	vm           *dc.VM
	owner        *dc.User
	cnDown       bool
	wantServices []Service
	wantInstance bool
	wantSvcs     bool
	wantReasons  []Reason
	wantProblems []string
}

func runListingCases(t *testing.T, cases []listingCase) {
	t.Helper()
	cfg := &Config{Zones: []Zone{zone("foo", "*")}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			owner := tc.owner
			if owner == nil {
				owner = newUser(ownerID)
			}
			res := Compute(cfg, &World{}, Input{VM: tc.vm, Owner: owner, CNDown: tc.cnDown})
			if !slices.EqualFunc(res.Services, tc.wantServices, func(a, b Service) bool {
				return a.Name == b.Name && slices.Equal(a.Ports, b.Ports)
			}) {
				t.Errorf("services %+v, want %+v", res.Services, tc.wantServices)
			}
			if res.ListInstance != tc.wantInstance || res.ListServices != tc.wantSvcs {
				t.Errorf("listInstance %v listServices %v, want %v %v",
					res.ListInstance, res.ListServices, tc.wantInstance, tc.wantSvcs)
			}
			if !slices.Equal(res.Reasons, tc.wantReasons) {
				t.Errorf("reasons %q, want %q", res.Reasons, tc.wantReasons)
			}
			checkProblems(t, res.Problems, tc.wantProblems)
		})
	}
}

// The reference's test/unit/flag-filter.test.js. Its owners carried
// booleans for the UFDS flags; UFDS sends strings, so true is "true" and
// false is "false" here. The reference tests did not check reasons; the
// reasons below are what its FlagFilter computes for the same input.
func TestFlagFilter(t *testing.T) {
	foo := []Service{svc("foo")}
	george := newUser(ownerID, login("george"), approved("false"), cnsEnabled(""))
	runListingCases(t, []listingCase{{
		name:         "processes a single service tag",
		vm:           newVM(vmID, services("foo")),
		wantServices: foo, wantInstance: true, wantSvcs: true,
	}, {
		// The reference's parser throws on "" too, so it also set
		// invalid_tag; its test only checked services and the flags.
		name:         "processes an empty tag",
		vm:           newVM(vmID, services("")),
		wantInstance: true, wantSvcs: true,
		wantReasons:  []Reason{ReasonInvalidTag},
		wantProblems: []string{`tag triton.cns.services "": empty`},
	}, {
		name:         "processes an empty sep tag",
		vm:           newVM(vmID, services(":")),
		wantInstance: true, wantSvcs: true,
		wantReasons:  []Reason{ReasonInvalidTag},
		wantProblems: []string{`service name "": empty label`},
	}, {
		name:         "removes from services when CN is down",
		vm:           newVM(vmID, services("foo")),
		cnDown:       true,
		wantServices: foo, wantInstance: true, wantSvcs: false,
		wantReasons: []Reason{ReasonCNDown},
	}, {
		name:         "removes from services when metadata flag not up",
		vm:           newVM(vmID, services("foo"), meta(metaStatus, "down")),
		wantServices: foo, wantInstance: true, wantSvcs: false,
		wantReasons: []Reason{ReasonInstEnFlag},
	}, {
		name:         "adds back into services when metadata flag up",
		vm:           newVM(vmID, services("foo"), meta(metaStatus, "up")),
		wantServices: foo, wantInstance: true, wantSvcs: true,
	}, {
		name:         "removes all records when user flag is off",
		vm:           newVM(vmID, services("foo")),
		owner:        newUser(ownerID, cnsEnabled("false")),
		wantServices: foo, wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonUserEnFlag},
	}, {
		name:         "keeps records when PTR tag is set with user flag",
		vm:           newVM(vmID, services("foo"), tag(tagReversePTR, "foobar.com")),
		owner:        newUser(ownerID, cnsEnabled("false")),
		wantServices: foo, wantInstance: true, wantSvcs: false,
		wantReasons: []Reason{ReasonUserEnFlag, ReasonPTR},
	}, {
		name:         "removes all records when ptr is invalid",
		vm:           newVM(vmID, services("foo"), tag(tagReversePTR, "_$%$!!")),
		owner:        newUser(ownerID, cnsEnabled("false")),
		wantServices: foo, wantInstance: false, wantSvcs: false,
		wantReasons:  []Reason{ReasonUserEnFlag},
		wantProblems: []string{`tag triton.cns.reverse_ptr "_$%$!!" ignored`},
	}, {
		name:         "removes all records when vm tag is set",
		vm:           newVM(vmID, services("foo"), tag(tagDisable, "true")),
		wantServices: foo, wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonInstEnTag},
	}, {
		name:         "removes all records when vm tag is set even with ptr",
		vm:           newVM(vmID, services("foo"), tag(tagReversePTR, "foobar.com"), tag(tagDisable, "true")),
		wantServices: foo, wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonPTR, ReasonInstEnTag},
	}, {
		name:         "removes all records when user is unapproved",
		vm:           newVM(vmID, services("foo")),
		owner:        newUser(ownerID, approved("false")),
		wantServices: foo, wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonUserNotApproved},
	}, {
		name:         "lists VMs owned by admin with a service",
		vm:           newVM(vmID, services("foo")),
		owner:        newUser(ownerID, login("admin"), cnsEnabled(""), approved("false")),
		wantServices: foo, wantInstance: true, wantSvcs: true,
		wantReasons: []Reason{ReasonUserEnFlag, ReasonAdmin},
	}, {
		name:         "accepts smartdc_role tag on admin VMs",
		vm:           newVM(vmID, tag("smartdc_role", "cloudapi")),
		owner:        newUser(ownerID, login("admin"), cnsEnabled(""), approved("false")),
		wantServices: []Service{svc("cloudapi")}, wantInstance: true, wantSvcs: true,
		wantReasons: []Reason{ReasonUserEnFlag, ReasonAdmin},
	}, {
		name:         "does not accept smartdc_role tag on non-admin",
		vm:           newVM(vmID, tag("smartdc_role", "cloudapi")),
		owner:        george,
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonUserEnFlag},
	}, {
		name:         "accepts manta_role==loadbalancer tag on poseidon VMs",
		vm:           newVM(vmID, tag("manta_role", "loadbalancer")),
		owner:        newUser(ownerID, login("poseidon")),
		wantServices: []Service{svc("loadbalancer")}, wantInstance: true, wantSvcs: true,
		wantReasons: []Reason{ReasonPoseidon},
	}, {
		name:         "accepts only whitelisted manta_role tag on poseidon VMs",
		vm:           newVM(vmID, tag("manta_role", "authcache")),
		owner:        newUser(ownerID, login("poseidon"), cnsEnabled("")),
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonUserEnFlag},
	}, {
		name:         "does not accept manta_role tag on non-poseidon",
		vm:           newVM(vmID, tag("manta_role", "loadbalancer")),
		owner:        newUser(ownerID, login("george"), cnsEnabled("")),
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonUserEnFlag},
	}, {
		name:         "removes all records when vm is destroyed",
		vm:           newVM(vmID, services("foo"), state("destroyed")),
		owner:        newUser(ownerID, approved("false")),
		wantServices: foo, wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonVMDown, ReasonUserNotApproved, ReasonDestroyed},
	}, {
		// The reference's second VM had destroyed: true and no state.
		name:         "removes all records when vm has destroyed set",
		vm:           newVM(vmID, services("foo"), state(""), destroyed()),
		owner:        newUser(ownerID, approved("false")),
		wantServices: foo, wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonVMDown, ReasonUserNotApproved, ReasonDestroyed},
	}, {
		name:         "removes all records when vm has failed",
		vm:           newVM(vmID, services("foo"), state("failed")),
		owner:        newUser(ownerID, approved("false")),
		wantServices: foo, wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonVMDown, ReasonUserNotApproved, ReasonDestroyed},
	}, {
		name:         "parses multiple service tags",
		vm:           newVM(vmID, services("foo,bar,test")),
		wantServices: []Service{svc("foo"), svc("bar"), svc("test")}, wantInstance: true, wantSvcs: true,
	}, {
		name:         "parses service tags with ports",
		vm:           newVM(vmID, services("foo:1234,foo:1235")),
		wantServices: []Service{svc("foo", 1234, 1235)}, wantInstance: true, wantSvcs: true,
	}, {
		name:         "parses service tags with future-compatible args",
		vm:           newVM(vmID, services("foo:1234:test=something,bar")),
		wantServices: []Service{svc("foo", 1234), svc("bar")}, wantInstance: true, wantSvcs: true,
	}})
}

// What cns decides beyond the reference's tests: its other listing paths
// and the fixes of reference §7.
func TestListing(t *testing.T) {
	admin := newUser(ownerID, login("admin"))
	runListingCases(t, []listingCase{{
		name:         "stopped VM keeps its instance",
		vm:           newVM(vmID, services("foo"), state("stopped")),
		wantServices: []Service{svc("foo")}, wantInstance: true, wantSvcs: false,
		wantReasons: []Reason{ReasonVMDown},
	}, {
		name:         "incomplete is down, not destroyed",
		vm:           newVM(vmID, state("incomplete")),
		wantInstance: true, wantSvcs: false,
		wantReasons: []Reason{ReasonVMDown},
	}, {
		name:         "status down wins over CN down and VM down (one reason)",
		vm:           newVM(vmID, meta(metaStatus, "down"), state("stopped")),
		cnDown:       true,
		wantInstance: true, wantSvcs: false,
		wantReasons: []Reason{ReasonInstEnFlag},
	}, {
		name:         "status UP is down and worth a problem",
		vm:           newVM(vmID, meta(metaStatus, "UP")),
		wantInstance: true, wantSvcs: false,
		wantReasons:  []Reason{ReasonInstEnFlag},
		wantProblems: []string{`triton.cns.status "UP" is neither "up" nor "down"`},
	}, {
		name:         "status that is not a string is down",
		vm:           newVM(vmID, meta(metaStatus, true)),
		wantInstance: true, wantSvcs: false,
		wantReasons:  []Reason{ReasonInstEnFlag},
		wantProblems: []string{`triton.cns.status true is neither`},
	}, {
		name:         "status null counts as absent",
		vm:           newVM(vmID, meta(metaStatus, nil)),
		wantInstance: true, wantSvcs: true,
	}, {
		name:         "stopped admin VM stays in its service",
		vm:           newVM(vmID, tag("smartdc_role", "cloudapi"), state("stopped")),
		owner:        admin,
		cnDown:       true,
		wantServices: []Service{svc("cloudapi")}, wantInstance: true, wantSvcs: true,
		wantReasons: []Reason{ReasonCNDown, ReasonAdmin},
	}, {
		name:         "admin VM without a service is an ordinary VM",
		vm:           newVM(vmID, state("stopped")),
		owner:        admin,
		wantInstance: true, wantSvcs: false,
		wantReasons: []Reason{ReasonVMDown},
	}, {
		name:         "admin nat zone gets no service",
		vm:           newVM(vmID, tag("smartdc_role", "nat")),
		owner:        newUser(ownerID, login("admin"), cnsEnabled("false")),
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonUserEnFlag},
	}, {
		// The reference compared roles case-sensitively and published
		// them as given: "NAT" slipped past the block list.
		name:         "role tags are lower-cased",
		vm:           newVM(vmID, tag("smartdc_role", "NAT")),
		owner:        newUser(ownerID, login("admin"), cnsEnabled("false")),
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonUserEnFlag},
	}, {
		name:         "upper-case smartdc_role",
		vm:           newVM(vmID, tag("smartdc_role", "CloudAPI")),
		owner:        admin,
		wantServices: []Service{svc("cloudapi")}, wantInstance: true, wantSvcs: true,
		wantReasons: []Reason{ReasonAdmin},
	}, {
		name:         "upper-case manta_role",
		vm:           newVM(vmID, tag("manta_role", "LoadBalancer")),
		owner:        newUser(ownerID, login("poseidon")),
		wantServices: []Service{svc("loadbalancer")}, wantInstance: true, wantSvcs: true,
		wantReasons: []Reason{ReasonPoseidon},
	}, {
		name:         "invalid smartdc_role",
		vm:           newVM(vmID, tag("smartdc_role", "cloud_api")),
		owner:        admin,
		wantInstance: true, wantSvcs: true,
		wantReasons:  []Reason{ReasonInvalidTag},
		wantProblems: []string{`tag smartdc_role "cloud_api"`},
	}, {
		name:         "role and services tag merge",
		vm:           newVM(vmID, tag("smartdc_role", "cloudapi"), services("cloudapi:443,docker:2376")),
		owner:        admin,
		wantServices: []Service{svc("cloudapi", 443), svc("docker", 2376)}, wantInstance: true, wantSvcs: true,
		wantReasons: []Reason{ReasonAdmin},
	}, {
		name:         "invalid services tag keeps the role",
		vm:           newVM(vmID, tag("smartdc_role", "cloudapi"), services("a..b")),
		owner:        admin,
		wantServices: []Service{svc("cloudapi")}, wantInstance: true, wantSvcs: true,
		wantReasons:  []Reason{ReasonInvalidTag, ReasonAdmin},
		wantProblems: []string{"empty label"},
	}, {
		name:         "disable tag false (boolean) does not disable",
		vm:           newVM(vmID, tag(tagDisable, false)),
		wantInstance: true, wantSvcs: true,
	}, {
		name:         "disable tag true (boolean)",
		vm:           newVM(vmID, tag(tagDisable, true)),
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonInstEnTag},
	}, {
		// As in the reference (its docs said otherwise): VMAPI stores
		// this tag as a boolean, a string is not false.
		name:         "disable tag string false disables",
		vm:           newVM(vmID, tag(tagDisable, "false")),
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonInstEnTag},
	}, {
		name:         "disable tag number 0 disables",
		vm:           newVM(vmID, tag(tagDisable, 0.0)),
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonInstEnTag},
	}, {
		name:         "disable tag null counts as absent",
		vm:           newVM(vmID, tag(tagDisable, nil)),
		wantInstance: true, wantSvcs: true,
	}, {
		name:         "docker disable label string false does not disable",
		vm:           newVM(vmID, tag(dockerLabel+tagDisable, "false")),
		wantInstance: true, wantSvcs: true,
	}, {
		name:         "docker disable label true",
		vm:           newVM(vmID, tag(dockerLabel+tagDisable, "true")),
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonInstEnTag},
	}, {
		name:         "plain disable tag false wins over the docker label",
		vm:           newVM(vmID, tag(tagDisable, false), tag(dockerLabel+tagDisable, "true")),
		wantInstance: true, wantSvcs: true,
	}, {
		name:         "docker services label when the tag is absent",
		vm:           newVM(vmID, tag(dockerLabel+tagServices, "web:80")),
		wantServices: []Service{svc("web", 80)}, wantInstance: true, wantSvcs: true,
	}, {
		name:         "docker services label ignored when the tag is present",
		vm:           newVM(vmID, services("api"), tag(dockerLabel+tagServices, "web:80")),
		wantServices: []Service{svc("api")}, wantInstance: true, wantSvcs: true,
	}, {
		name:         "services tag that is a number",
		vm:           newVM(vmID, tag(tagServices, 80.0)),
		wantInstance: true, wantSvcs: true,
		wantReasons:  []Reason{ReasonInvalidTag},
		wantProblems: []string{"want a string, got a number"},
	}, {
		name:         "services tag that is a boolean",
		vm:           newVM(vmID, tag(tagServices, true)),
		wantInstance: true, wantSvcs: true,
		wantReasons:  []Reason{ReasonInvalidTag},
		wantProblems: []string{"want a string, got a boolean"},
	}, {
		name:         "reverse_ptr that is a number",
		vm:           newVM(vmID, tag(tagReversePTR, 12345.0)),
		owner:        newUser(ownerID, cnsEnabled("false")),
		wantInstance: false, wantSvcs: false,
		wantReasons:  []Reason{ReasonUserEnFlag},
		wantProblems: []string{"want a string, got a number"},
	}, {
		name:         "UFDS flags: any string but false is on",
		vm:           newVM(vmID),
		owner:        newUser(ownerID, cnsEnabled("TRUE"), approved("yes")),
		wantInstance: true, wantSvcs: true,
	}, {
		name:         "UFDS flag absent is off",
		vm:           newVM(vmID),
		owner:        newUser(ownerID, cnsEnabled("")),
		wantInstance: false, wantSvcs: false,
		wantReasons: []Reason{ReasonUserEnFlag},
	}})
}
