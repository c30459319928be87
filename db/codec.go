package db

import (
	"encoding/binary"

	"github.com/tritondatacenter/cns/db/field"
)

// enc and dec are the store's field encoding (package field).
type (
	enc = field.Encoder
	dec = field.Decoder
)

func u64key(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
