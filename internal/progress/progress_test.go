package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// clock is a time the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)} }
func lines(b *bytes.Buffer) []string     { return strings.Split(strings.TrimRight(b.String(), "\n"), "\n") }
func count(s, sub string) int            { return strings.Count(s, sub) }
func meter(tty bool, c *clock) (*Meter, *bytes.Buffer) {
	var b bytes.Buffer
	return newMeter(&b, Options{Label: "sim sweep", Unit: "runs", Every: 5 * time.Second}, tty, c.now), &b
}

// TestPlain: away from a terminal the first step and the last are
// printed, and in between a line at most every Every.
func TestPlain(t *testing.T) {
	c := newClock()
	m, b := meter(false, c)
	for i := int64(1); i <= 20; i++ {
		c.advance(time.Second)
		m.Update(i, 20, "")
	}
	m.Finish()
	got := lines(b)
	want := []string{
		"sim sweep: 1/20 runs (5%, 1s)",
		"sim sweep: 6/20 runs (30%, 6s)",
		"sim sweep: 11/20 runs (55%, 11s)",
		"sim sweep: 16/20 runs (80%, 16s)",
		"sim sweep: 20/20 runs (100%, 20s)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), strings.Join(want, "\n"))
	}
	if strings.ContainsAny(b.String(), "\r\x1b") {
		t.Fatalf("terminal control in plain output: %q", b.String())
	}
}

// TestPlainFinish: a step left unprinted by the throttle is printed by
// Finish, with its note; lines that stay come out as they are.
func TestPlainFinish(t *testing.T) {
	c := newClock()
	m, b := meter(false, c)
	m.Update(1, 10, "a")
	c.advance(time.Second)
	m.Update(7, 10, "best 0.5")
	m.Println("incast-2: grid best 0.9")
	m.Finish()
	m.Finish()
	want := "sim sweep: 1/10 runs (10%, 0s): a\nincast-2: grid best 0.9\nsim sweep: 7/10 runs (70%, 1s): best 0.5\n"
	if b.String() != want {
		t.Fatalf("got %q want %q", b.String(), want)
	}
}

// TestTerminal: on a terminal the bar redraws in place (at most every
// 100 ms, the last step always), Println ends the bar's line first and
// Finish ends it for what follows.
func TestTerminal(t *testing.T) {
	c := newClock()
	m, b := meter(true, c)
	m.Update(1, 4, "x")
	m.Update(2, 4, "y") // too soon: not drawn
	c.advance(time.Second)
	m.Update(3, 4, "z")
	m.Println("a result")
	m.Update(4, 4, "")
	m.Finish()
	s := b.String()
	if count(s, "\r") != 3 || strings.Contains(s, "2/4") {
		t.Fatalf("redraws: %q", s)
	}
	if !strings.Contains(s, "\rsim sweep [=======                       ] 1/4 runs  25% x\x1b[K") {
		t.Fatalf("bar: %q", s)
	}
	if !strings.Contains(s, "3/4 runs  75% z\x1b[K\na result\n\r") {
		t.Fatalf("line after the bar: %q", s)
	}
	if !strings.HasSuffix(s, "[==============================] 4/4 runs 100%\x1b[K\n") {
		t.Fatalf("end: %q", s)
	}
}

// TestQuietAndCounts: a quiet meter is nil and takes every call; Count
// formats the counts.
func TestQuietAndCounts(t *testing.T) {
	m := New(os.Stderr, Options{Quiet: true})
	if m != nil {
		t.Fatal("quiet meter")
	}
	m.Update(1, 2, "")
	m.Println("x")
	m.Finish()
	c := newClock()
	var b bytes.Buffer
	d := newMeter(&b, Options{Label: "sim", Count: func(n int64) string { return time.Duration(n).String() }}, false, c.now)
	d.Update(int64(time.Millisecond), int64(2*time.Millisecond), "")
	if b.String() != "sim: 1ms/2ms (50%, 0s)\n" {
		t.Fatalf("%q", b.String())
	}
	var buf bytes.Buffer
	if IsTerminal(&buf) {
		t.Fatal("a buffer is no terminal")
	}
	if f, err := os.Open(os.DevNull); err == nil {
		defer f.Close()
		if IsTerminal(f) {
			t.Fatal("/dev/null is no terminal")
		}
	}
}
