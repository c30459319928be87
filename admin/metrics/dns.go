package metrics

// DNS are the DNS server's counters for GET /metrics.
type DNS struct {
	// AnswersByType and AnswersByRcode count answers per transport
	// ("udp", "tcp") and query type or rcode name.
	AnswersByType  map[string]map[string]uint64
	AnswersByRcode map[string]map[string]uint64
	Dropped        uint64 // requests given no answer
	// Client answers (client_answers): owner-less names answered in the
	// asking instance's scope, and asked by callers identified as no one.
	ClientScoped, ClientUnidentified uint64
	// Forwarded queries (all zero when forwarding is off).
	ForwardHits, ForwardMisses, ForwardFailures uint64
	ForwardCached                               int
	RRLLimited                                  uint64
	// Transfers served, by outcome.
	AXFR, IXFR, UpToDate, Refused uint64
	// NotifyPending counts NOTIFY targets that have not answered for
	// their zone's serial.
	NotifyPending int
	// Propagation holds, per peer (NOTIFY address), the commit-to-serving
	// times (seconds).
	Propagation map[string]Histogram
}
