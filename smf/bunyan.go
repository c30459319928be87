package smf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// NewBunyanHandler returns a log handler that writes to w one JSON object
// per line in bunyan's format (name, hostname, pid, level as a bunyan
// number, msg, time, v), which is what SMF log files, `bunyan` and the
// rest of Triton expect, at level and above. Attributes whose names say
// they are secrets (password, secret, token) are redacted.
func NewBunyanHandler(w io.Writer, name string, level *slog.LevelVar) slog.Handler {
	host, _ := os.Hostname()
	return &bunyanHandler{out: &lockedWriter{w: w}, name: name, hostname: host, pid: os.Getpid(), level: level}
}

type bunyanHandler struct {
	out      *lockedWriter
	name     string
	hostname string
	pid      int
	level    *slog.LevelVar
	attrs    []byte // pre-encoded `,"k":v` pairs
	group    string // prefix for later attribute keys
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Bunyan levels.
const (
	bunyanTrace = 10
	bunyanDebug = 20
	bunyanInfo  = 30
	bunyanWarn  = 40
	bunyanError = 50
)

func bunyanLevel(l slog.Level) int {
	switch {
	case l < slog.LevelDebug:
		return bunyanTrace
	case l < slog.LevelInfo:
		return bunyanDebug
	case l < slog.LevelWarn:
		return bunyanInfo
	case l < slog.LevelError:
		return bunyanWarn
	default:
		return bunyanError
	}
}

func (h *bunyanHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *bunyanHandler) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	b.WriteString(`{"name":`)
	writeJSON(&b, h.name)
	b.WriteString(`,"hostname":`)
	writeJSON(&b, h.hostname)
	fmt.Fprintf(&b, `,"pid":%d,"level":%d`, h.pid, bunyanLevel(r.Level))
	b.Write(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	b.WriteString(`,"msg":`)
	writeJSON(&b, r.Message)
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	b.WriteString(`,"time":"`)
	b.WriteString(t.UTC().Format("2006-01-02T15:04:05.000Z"))
	b.WriteString(`","v":0}` + "\n")
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := h.out.w.Write(b.Bytes())
	return err
}

func (h *bunyanHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	var b bytes.Buffer
	b.Write(h.attrs)
	for _, a := range as {
		appendAttr(&b, h.group, a)
	}
	c.attrs = b.Bytes()
	return &c
}

func (h *bunyanHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.group = h.group + name + "."
	return &c
}

// secretKeys are attribute names whose values never reach a log.
var secretKeys = []string{"password", "secret", "token", "bindpassword"}

func appendAttr(b *bytes.Buffer, group string, a slog.Attr) {
	if a.Equal(slog.Attr{}) {
		return
	}
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, ga := range v.Group() {
			appendAttr(b, group+a.Key+".", ga)
		}
		return
	}
	key := group + a.Key
	switch key {
	case "name", "hostname", "pid", "level", "msg", "time", "v":
		key = "attr." + key // never shadow bunyan's core fields
	}
	b.WriteByte(',')
	writeJSON(b, key)
	b.WriteByte(':')
	for _, s := range secretKeys {
		if strings.Contains(strings.ToLower(a.Key), s) {
			b.WriteString(`"[redacted]"`)
			return
		}
	}
	switch v.Kind() {
	case slog.KindString:
		writeJSON(b, v.String())
	case slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool:
		writeJSON(b, v.Any())
	case slog.KindDuration:
		writeJSON(b, v.Duration().String())
	case slog.KindTime:
		writeJSON(b, v.Time().UTC().Format(time.RFC3339Nano))
	default:
		x := v.Any()
		if err, ok := x.(error); ok {
			writeJSON(b, err.Error())
			return
		}
		writeJSON(b, x)
	}
}

func writeJSON(b *bytes.Buffer, v any) {
	enc, err := json.Marshal(v)
	if err != nil {
		enc, _ = json.Marshal(fmt.Sprint(v))
	}
	b.Write(enc)
}
