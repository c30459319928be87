// Package status holds cns's read shapes: what the DNS server, the
// updater, the self-removal hysteresis and the aggregator report about
// themselves, in the form the REST API serves. Each is defined once,
// here: the part that knows it returns it, and package admin serves it as
// it is (admin.Propagation is status.Propagation), so no field is copied
// by hand between a twin in the domain and one in the API.
//
// It imports nothing of the project, so serve and feeds may return these
// types without importing each other or package admin (DESIGN's import
// rules); it sits under admin because admin owns the API's contract. A
// field changed here changes the API: admin's contract tests (the golden
// answers of inproc_api_test.go, admin/testdata) fail on it, and a field is only
// ever added.
package status
