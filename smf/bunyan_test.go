package smf

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// Every log line is one JSON object with bunyan's fields, and secrets
// never appear.
func TestBunyanLog(t *testing.T) {
	var buf bytes.Buffer
	level := new(slog.LevelVar)
	log := slog.New(NewBunyanHandler(&buf, "cns", level))
	log.Info("hello", "zone", "a.example", "serial", 42, "bindPassword", "hunter2")
	log.With("feed", "vmapi").WithGroup("http").Warn("slow", "took", time.Second)
	log.Debug("not shown at info")
	log.Error("failed", "err", os.ErrNotExist, "msg", "shadow")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	wantLevels := []float64{30, 40, 50}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not JSON: %s", i, line)
		}
		for _, k := range []string{"name", "hostname", "pid", "level", "msg", "time", "v"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i, k, line)
			}
		}
		if m["level"] != wantLevels[i] {
			t.Errorf("line %d level %v, want %v", i, m["level"], wantLevels[i])
		}
		if _, err := time.Parse(time.RFC3339, m["time"].(string)); err != nil {
			t.Errorf("line %d time: %v", i, err)
		}
	}
	if strings.Contains(buf.String(), "hunter2") {
		t.Error("a secret reached the log")
	}
	if !strings.Contains(lines[1], `"feed":"vmapi"`) || !strings.Contains(lines[1], `"http.took":"1s"`) {
		t.Errorf("attrs and groups: %s", lines[1])
	}
	if !strings.Contains(lines[2], `"msg":"failed"`) || !strings.Contains(lines[2], `"attr.msg":"shadow"`) {
		t.Errorf("core fields shadowed: %s", lines[2])
	}
}
