module github.com/tritondatacenter/cns

go 1.26.8

require (
	github.com/alecthomas/kong v1.17.0
	github.com/go-asn1-ber/asn1-ber v1.5.8
	github.com/go-ldap/ldap/v3 v3.4.15
	github.com/gorilla/websocket v1.5.3
	github.com/miekg/dns v1.1.73
	go.etcd.io/bbolt v1.5.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/Azure/go-ntlmssp v0.1.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
