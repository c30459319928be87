// Package sdcsim is an in-process simulator of the Triton (SDC) services
// cns consumes, for tests and for `cns sim`: VMAPI with its changefeed,
// CNAPI, NAPI and UFDS (LDAP and LDAPS), each on its own 127.0.0.1
// ephemeral port, over one mutable in-memory world. The wire behaviour
// follows shared/reference/sdc-apis.md; §8 there is the scope.
//
// # Starting
//
//	s, err := sdcsim.New(inv, sdcsim.Options{})   // inv is a dc.Inventory
//	defer s.Close()
//	cfg := s.Config()                                // cns config keys, below
//
// dc.LoadInventory reads and validates an inventory file; Run is `cns sim`.
//
// # Configuration keys
//
// Config (and the first line Run prints) is a JSON object holding the cns
// configuration keys that point at the simulator:
//
//	"vmapi_opts":      {"address": "http://127.0.0.1:P1", "limit": 500}
//	"cnapi_opts":      {"address": "http://127.0.0.1:P2"}
//	"napi_opts":       {"address": "http://127.0.0.1:P3"}
//	"ufds_opts":       {"address": "ldaps://127.0.0.1:P4", "bindDN": "cn=root",
//	                    "bindPassword": "secret", "ca_file": "/tmp/.../ufds-ca.pem"}
//	"changefeed_opts": {"resource": "vm", "subResources": [the 9 of VMSubResources],
//	                    "instance": "<uuid>"}
//
// Every address is a full URL, which cns accepts besides the bare host
// names SAPI renders. The changefeed has no address of its own: as in
// Triton it is on VMAPI's (GET /changefeeds and the WebSocket upgrade).
// ufds_opts.ca_file is the PEM of the self-signed LDAPS certificate, which
// is its own CA and names 127.0.0.1 and localhost: a client that verifies
// trusts that file; a client that skips verification, as CNS always has
// (rejectUnauthorized: false), needs nothing. With
// Options.PlainLDAPInConfig the address is ldap:// instead (faster for
// tests). LDAPURL and LDAPSURL give both addresses whatever the config says.
//
// # The world and its events
//
// Mutations are Go calls, safe from any goroutine: CreateVM, PutVM,
// ModifyVM (any function on a copy), SetVMState, StopVM, StartVM,
// DestroyVM (state destroyed plus the timestamp; GET still returns the VM),
// PurgeVM (hard delete, no event), SetTag, DeleteTag, SetMetadata,
// DeleteMetadata, SetAlias, SetNICs, ModifyVMsOnServer (a CN reboot's
// burst), PublishChange (a raw item); PutServer, ModifyServer, ServerDown,
// ServerUp, RemoveServer; AddUser, SetUserAttrs, SetUserFlag, RemoveUser,
// AppendChangelog, SetChangeNumber; PutNetwork, RemoveNetwork,
// PutNetworkPool, RemoveNetworkPool. Apply turns the difference between two
// inventories into these calls. Inventory returns a snapshot.
//
// Like the real services, a VM mutation publishes a changefeed item whose
// subResources are the top-level keys that differ between the old and new
// VM JSON, once per difference deep-diff would report (so a change to two
// fields of one NIC gives "nics" twice, and last_modified and zone_state
// appear too); creation lists every key. Items go, at once or at every
// Options.DeliveryInterval sweep, to the registered listeners whose
// subResources intersect; items no listener matches are dropped, and
// changes made while nobody listens are lost for good, as in VMAPI. A user
// mutation appends a UFDS changelog entry (add, modify with ldapjs
// "changes", delete). Servers, networks and pools have no feed; consumers
// see them on their next poll.
//
// # Faults
//
// SetFault installs a Fault on a Route (or AnyRoute, every HTTP route but
// /ping): an HTTP status with a restify body (503 MorayBucketsNotSetup,
// 500, 409, 404, ...), latency, a hang until ReleaseHangs or the client
// gives up, a malformed (cut) JSON body, or an LDAP result code, for the
// next N requests, a random fraction of them, or all. SetFeedFaults
// switches changefeed faults (refused upgrade, change before bootstrap,
// double bootstrap, pause, reorder, duplicate or drop items); DropFeeds
// ends connections with a close frame, a TCP reset or a half-open stop;
// SendFeedFrame sends raw (malformed) frames. SetLDAPDown refuses LDAP
// connections and resets open ones, ResetLDAPConns resets them only.
// Requests counts what each route received.
//
// # Fidelity
//
// Payloads are rendered key by key in each service's own layout (VMAPI's
// translateVm, CNAPI's server object, NAPI's serialize, UFDS's entries),
// never by encoding the dc types the clients decode into, so that a field
// name the client gets wrong cannot agree with the simulator; each route's
// handler names the real behaviour it reproduces.
//
// Faithful: ListVms parameters, strict 409 validation, uuid DESC order,
// marker paging with (uuid<=M), limit+1 rows and the limit+1 page when the
// marker VM left the set, x-joyent-resource-count, destroyed VMs on GET,
// the always-present VM keys as null; the changefeed's registration (v1
// and v2), close-with-reason, bootstrap, item shape, 1.5.x duplicate
// fan-out (Options.DuplicateFanout), resourceObject (Options.ResourceObject)
// and silence towards clients; CNAPI's extras, transitional status,
// uuid ASC and 1000-row cap, its validation answers (409 InvalidArgument
// for an unknown parameter, 500 InvalidParameters for a bad value, 400 for
// a limit out of range); NAPI's pools, NICs, 404/422 bodies and strict
// list parameters (422 UnknownParameters); UFDS's
// ", " DNs, latestchangenumber for any scope, integer changenumber
// ordering, sizeLimit answered with success, the changelog entry format.
//
// Not faithful: VM fields outside dc.VM are not kept (the always-present
// ones render null); CNAPI's GET /servers/:uuid is not served; ListVms "predicate", "query", "sort", "image_uuid",
// "billing_id" and "internal_metadata.*" answer 500 "not simulated"
// rather than a wrong page; the changefeed upgrades on any path (as the
// publisher does) but fills in a missing Sec-WebSocket-Version header
// because gorilla/websocket insists on it; NAPI's uuid-prefix list filter
// answers 500 "not simulated"; the LDAP server refuses writes (use the Go API), StartTLS
// and other extended operations, and answers searches only after a root
// bind; user entries get a synthesized email; no auth, moray, workflow or
// SAPI.
package sdcsim
