package dumper

import (
	"context"
	"testing"
	"time"
)

// TestStepped: a Stepped dumper runs no goroutine: nothing is captured
// until the caller polls, Poll takes what waits in each queue, Stop
// drains what the last polls left, and the capture's epoch and duration
// come from the caller's clock.
func TestStepped(t *testing.T) {
	f, port := newFeeder(t, 2, 1024)
	virt := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := New(Config{Name: "st", Port: port, NumPkts: 1023, Dir: t.TempDir(), Stepped: true,
		Now: func() time.Time { return virt }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Poll() != 0 {
		t.Fatal("polled before Start")
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	base := virt.UnixNano()
	buf := make([]byte, 2048)
	for s := uint64(1); s <= 100; s++ {
		f.send(int(s%2), buf[:mirrored(buf, s, base)])
	}
	// No worker: the copies wait in the rings until the caller polls.
	time.Sleep(10 * time.Millisecond)
	if st := d.Status(); st.Captured != 0 {
		t.Fatalf("captured %d without a poll", st.Captured)
	}
	if got := d.Poll(); got != 64 { // a burst of 32 from each of the two queues
		t.Fatalf("a poll took %d copies, want 64", got)
	}
	virt = virt.Add(3 * time.Millisecond)
	res, err := d.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Captured != 100 || res.Written != 100 {
		t.Fatalf("captured %d, written %d of 100 (Stop drains the rest)", res.Captured, res.Written)
	}
	if res.Duration != 3*time.Millisecond {
		t.Fatalf("duration %v on the caller's clock, want 3ms", res.Duration)
	}
}
