package admin

import (
	"testing"
	"time"
)

func TestAgo(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 sec"}, {time.Second, "1 sec"}, {2 * time.Second, "2 secs"},
		{59400 * time.Millisecond, "59 secs"}, {59500 * time.Millisecond, "1 min"},
		{90 * time.Second, "2 mins"}, {36 * time.Hour, "2 days"}, {23 * time.Hour, "23 hrs"},
		{23*time.Hour + 30*time.Minute, "1 day"}, {45 * 24 * time.Hour, "6 wks"},
	} {
		if got := Ago(tc.d); got != tc.want {
			t.Errorf("Ago(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
