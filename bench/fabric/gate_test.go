package fabric

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestGatePingPong: two goroutines hand a count back and forth through
// two gates, as the coordinator and a worker do at every window, and
// every hand-over sees the writes made before it. Some rounds the
// poster is quick (the waiter is still spinning), some it sleeps past
// gateSpin (the waiter has parked), so both ways of waking are taken;
// the parks counter says they were.
func TestGatePingPong(t *testing.T) {
	rounds := 2000
	if raceEnabled {
		rounds = 400
	}
	ping, pong := newGate(), newGate()
	var shared []int // written by one side, read by the other after a gate
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; n <= rounds; n++ {
			ping.wait(uint64(n))
			if len(shared) != 2*n-1 || shared[len(shared)-1] != n {
				t.Errorf("round %d: the worker sees %d values, last %v", n, len(shared), shared[len(shared)-1:])
				return
			}
			if n%7 == 0 {
				time.Sleep(2 * gateSpin) // the coordinator parks
			}
			shared = append(shared, -n)
			pong.post()
		}
	}()
	for n := 1; n <= rounds; n++ {
		if n%5 == 0 {
			time.Sleep(2 * gateSpin) // the worker parks
		}
		shared = append(shared, n)
		ping.post()
		pong.wait(uint64(n))
		if got := shared[len(shared)-1]; len(shared) != 2*n || got != -n {
			t.Fatalf("round %d: the coordinator sees %d values, last %d", n, len(shared), got)
		}
	}
	wg.Wait()
	if ping.parks == 0 || pong.parks == 0 {
		t.Fatalf("parked %d and %d times: the sleeps should have made both sides park", ping.parks, pong.parks)
	}
}

// TestGateManyPosters: one waiter, several posters (the coordinator
// waiting for every worker's done), with posters that come late enough
// for the waiter to park between them; the waiter returns only once all
// have posted, and no token is left over.
func TestGateManyPosters(t *testing.T) {
	const posters = 4
	rounds := 300
	if raceEnabled {
		rounds = 60
	}
	g := newGate()
	var done [posters]int
	var mu sync.Mutex // only to read done's counts under -race
	var want uint64
	for n := 1; n <= rounds; n++ {
		var wg sync.WaitGroup
		for i := range posters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if (n+i)%3 == 0 {
					time.Sleep(time.Duration(i+1) * gateSpin)
				}
				mu.Lock()
				done[i] = n
				mu.Unlock()
				g.post()
			}()
		}
		want += posters
		g.wait(want)
		mu.Lock()
		for i, d := range done {
			if d != n {
				t.Fatalf("round %d: the wait returned before poster %d posted", n, i)
			}
		}
		mu.Unlock()
		wg.Wait()
	}
	if len(g.wake) != 0 || g.parked.Load() {
		t.Fatalf("%d tokens left over, parked %v", len(g.wake), g.parked.Load())
	}
	if g.parks == 0 {
		t.Fatal("the waiter never parked")
	}
}

// TestParallelOneWorker: with one processor, one worker runs every
// partition in turn, and the results are still the sequential run's.
func TestParallelOneWorker(t *testing.T) {
	const until = 1_000_000
	want := resultBytes(t, run(t, parScenario(t, 3), until))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := parScenario(t, 3)
	if _, err := s.RunParallel(context.Background(), until/2, 3); err != nil {
		t.Fatal(err)
	}
	if w := s.par.workers(); w != 1 {
		t.Fatalf("%d workers on one processor", w)
	}
	if got := resultBytes(t, run(t, s, until)); !bytes.Equal(got, want) {
		t.Fatalf("one worker, 3 partitions: results differ from the sequential run\n%s", firstDiff(want, got))
	}
}

// TestParallelCanceled: a parallel run whose context ends stops its
// workers and returns ErrCanceled, and the simulation goes on in parallel
// afterwards (new workers, new gates) to the sequential run's results.
func TestParallelCanceled(t *testing.T) {
	const until = 1_000_000
	want := resultBytes(t, run(t, parScenario(t, 4), until))
	s := parScenario(t, 4)
	if _, err := s.RunParallel(context.Background(), until/4, 2); err != nil {
		t.Fatal(err)
	}
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.RunParallel(ctx, until, 2); !errors.Is(err, ErrCanceled) {
		t.Fatalf("canceled run: %v, want ErrCanceled", err)
	}
	if s.Now() > until/4 {
		t.Fatalf("a canceled run moved the clock to %d", s.Now())
	}
	// The workers have posted their last done by the time RunParallel
	// returns, and return right after: give them time to exit (a loaded
	// machine may not run them at once), but no goroutine stays.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n := runtime.NumGoroutine()
		if n <= goroutines {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the canceled run, %d before it", n, goroutines)
		}
	}
	if got := resultBytes(t, run(t, s, until)); !bytes.Equal(got, want) {
		t.Fatalf("after a canceled piece: results differ from the sequential run\n%s", firstDiff(want, got))
	}
}
