//go:build race

package main

// raceBuild: the tests run with -race, so the binary they start is built
// with it too.
func init() { raceBuild = true }
