package sdc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable clock for the lookups' expiry.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLookupsKeepFoundOnly(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	c := newLookups[string](time.Minute, 8, 2, clock.now)
	ctx := context.Background()
	var fetches atomic.Int32
	answer := func(v string, found bool, err error) func(context.Context) (string, bool, error) {
		return func(context.Context) (string, bool, error) {
			fetches.Add(1)
			return v, found, err
		}
	}
	steps := []struct {
		name      string
		key       string
		fetch     func(context.Context) (string, bool, error)
		advance   time.Duration
		want      string
		wantFound bool
		wantErr   bool
		fetched   int32 // fetches so far
	}{
		{"first look fetches", "a", answer("A", true, nil), 0, "A", true, false, 1},
		{"found answers are kept", "a", answer("other", true, nil), 0, "A", true, false, 1},
		{"until they expire", "a", answer("A2", true, nil), time.Minute, "A2", true, false, 2},
		{"not found is not kept", "b", answer("", false, nil), 0, "", false, false, 3},
		{"so it is asked again", "b", answer("B", true, nil), 0, "B", true, false, 4},
		{"failures are not kept", "c", answer("", false, errors.New("ufds down")), 0, "", false, true, 5},
		{"so the next look retries", "c", answer("C", true, nil), 0, "C", true, false, 6},
	}
	for _, st := range steps {
		clock.advance(st.advance)
		v, found, err := c.get(ctx, st.key, time.Second, st.fetch)
		if v != st.want || found != st.wantFound || (err != nil) != st.wantErr || fetches.Load() != st.fetched {
			t.Fatalf("%s: got %q %v %v after %d fetches; want %q %v err=%v after %d",
				st.name, v, found, err, fetches.Load(), st.want, st.wantFound, st.wantErr, st.fetched)
		}
	}
}

// Concurrent looks at one key share one fetch; looks at many keys run at
// most `fetching` fetches at once.
func TestLookupsBoundTheService(t *testing.T) {
	c := newLookups[int](time.Minute, 100, 3, time.Now)
	ctx := context.Background()

	t.Run("one fetch per key", func(t *testing.T) {
		release := make(chan struct{})
		var fetches atomic.Int32
		wait := launch(20, func(int) {
			v, found, err := c.get(ctx, "k", time.Second, func(context.Context) (int, bool, error) {
				fetches.Add(1)
				<-release
				return 7, true, nil
			})
			if v != 7 || !found || err != nil {
				t.Errorf("got %d %v %v", v, found, err)
			}
		})
		close(release)
		wait()
		if n := fetches.Load(); n != 1 {
			t.Errorf("%d fetches for 20 concurrent looks at one key, want 1", n)
		}
	})

	t.Run("a few fetches at once", func(t *testing.T) {
		release := make(chan struct{})
		var inFlight, most atomic.Int32
		full := make(chan struct{})
		var fullOnce sync.Once
		wait := launch(20, func(i int) {
			c.get(ctx, fmt.Sprint("key", i), time.Second, func(context.Context) (int, bool, error) {
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if n == 3 {
					fullOnce.Do(func() { close(full) })
				}
				<-release
				inFlight.Add(-1)
				return i, true, nil
			})
		})
		<-full
		close(release)
		wait()
		if m := most.Load(); m != 3 {
			t.Errorf("at most %d fetches at once, want 3", m)
		}
	})

	t.Run("a waiter leaves when its context ends", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		entered := make(chan struct{})
		go c.get(ctx, "slow", time.Minute, func(context.Context) (int, bool, error) {
			close(entered)
			<-release
			return 1, true, nil
		})
		<-entered
		wctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, _, err := c.get(wctx, "slow", time.Minute, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled waiter: %v", err)
		}
	})
}

// launch starts n goroutines running f(i), returns once each has started,
// and gives a function waiting for them to end.
func launch(n int, f func(i int)) (wait func()) {
	var started, done sync.WaitGroup
	for i := range n {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			f(i)
		}()
	}
	started.Wait()
	return done.Wait
}

func TestLookupsAreBounded(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	c := newLookups[int](time.Minute, 8, 2, clock.now)
	for i := range 30 {
		clock.advance(time.Millisecond) // each later answer expires later
		c.get(context.Background(), fmt.Sprint(i), time.Second, func(context.Context) (int, bool, error) { return i, true, nil })
		if n := len(c.entries); n > 8 {
			t.Fatalf("%d entries kept, at most 8", n)
		}
	}
	// The newest stay, the oldest went.
	c.mu.Lock()
	_, newest := c.entries["29"]
	_, oldest := c.entries["0"]
	c.mu.Unlock()
	if !newest || oldest {
		t.Errorf("kept newest %v, kept oldest %v", newest, oldest)
	}
	// forget drops what it is asked to.
	c.forget(func(v int) bool { return v == 29 })
	if _, ok := c.entries["29"]; ok {
		t.Error("forget kept the entry")
	}
}
