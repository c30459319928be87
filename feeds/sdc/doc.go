// Package sdc is the SDC feed: the clients of the Triton (SDC) APIs cns
// consumes (VMAPI list, get and changefeed, CNAPI, NAPI, UFDS over LDAP) and
// the Feed that keeps the updater's picture of the data center current
// from them. What those APIs describe (VMs, users, servers, networks) is
// package dc's.
package sdc
