// Package progress shows how far a long job has come: on a terminal a bar
// that redraws itself in place, elsewhere (a log file, CI, a pipe) a plain
// line at most every few seconds, so that logs stay readable; nothing when
// the user asked for quiet. It imports nothing of the project.
package progress

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultEvery is the least time between two plain lines.
const DefaultEvery = 10 * time.Second

// redraw is the least time between two redraws of the bar: a job that
// reports thousands of steps a second must not spend its time drawing.
const redraw = 100 * time.Millisecond

const barWidth = 30

// Options say what a Meter shows.
type Options struct {
	// Label starts every line, e.g. "sim sweep".
	Label string
	// Unit names what is counted ("runs", "traces"); empty for none.
	Unit string
	// Count formats a count; nil prints it in decimal. The simulator
	// counts simulated nanoseconds and shows them as durations.
	Count func(int64) string
	// Every is the least time between two plain lines (0: DefaultEvery).
	Every time.Duration
	// Quiet shows nothing.
	Quiet bool
}

// Meter reports a job's progress to a writer. A nil *Meter, which New
// returns for Quiet, accepts every call and shows nothing, so library code
// can take one without checking. It is safe for concurrent use: workers
// may report steps themselves.
type Meter struct {
	mu    sync.Mutex
	w     io.Writer
	o     Options
	tty   bool
	now   func() time.Time
	start time.Time
	last  time.Time // of the last line or redraw
	shown bool      // the latest step is on screen
	drawn bool      // a bar occupies the terminal's current line

	done, total int64
	note        string
}

// New returns a meter writing to w: a bar when w is a terminal, plain
// lines otherwise; nil when o.Quiet.
func New(w io.Writer, o Options) *Meter {
	if o.Quiet {
		return nil
	}
	return newMeter(w, o, IsTerminal(w), time.Now)
}

func newMeter(w io.Writer, o Options, tty bool, now func() time.Time) *Meter {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Count == nil {
		o.Count = func(n int64) string { return strconv.FormatInt(n, 10) }
	}
	t := now()
	return &Meter{w: w, o: o, tty: tty, now: now, start: t}
}

// IsTerminal says whether w is a terminal. /dev/null is a character
// device too, so the test is the terminal ioctl, not the file's mode.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Update reports done of total steps, with a note on the current one (a
// best score, what the step was); it is drawn or printed when its time
// has come. The last step (done == total) is always printed.
func (m *Meter) Update(done, total int64, note string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done, m.total, m.note, m.shown = done, total, note, false
	t := m.now()
	switch {
	case m.tty && (done >= total || t.Sub(m.last) >= redraw):
		m.draw(t)
	case !m.tty && (done >= total || m.last.IsZero() || t.Sub(m.last) >= m.o.Every):
		m.line(t)
	}
}

// Step is Update without a note, in the shape of the progress callbacks
// of the evaluations and sweeps (m.Step is one).
func (m *Meter) Step(done, total int) { m.Update(int64(done), int64(total), "") }

// Println prints a line that stays (a stage finished, a result), below
// the bar on a terminal.
func (m *Meter) Println(s string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endBar()
	fmt.Fprintln(m.w, s)
}

// Finish shows the last step reported if it is not on screen yet and
// ends the bar's line, so that what the job prints next starts on a line
// of its own.
func (m *Meter) Finish() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.shown && (m.done > 0 || m.total > 0) {
		if m.tty {
			m.draw(m.now())
		} else {
			m.line(m.now())
		}
	}
	m.endBar()
}

func (m *Meter) endBar() {
	if m.drawn {
		fmt.Fprintln(m.w)
		m.drawn = false
	}
}

// counts is "done/total unit".
func (m *Meter) counts() string {
	s := m.o.Count(m.done) + "/" + m.o.Count(m.total)
	if m.o.Unit != "" {
		s += " " + m.o.Unit
	}
	return s
}

func (m *Meter) percent() int64 {
	if m.total <= 0 {
		return 0
	}
	return min(100*m.done/m.total, 100)
}

// draw redraws the bar in place; the escape clears what a longer line
// left behind.
func (m *Meter) draw(t time.Time) {
	fill := int(m.percent()) * barWidth / 100
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", barWidth-fill)
	s := fmt.Sprintf("\r%s [%s] %s %3d%%", m.o.Label, bar, m.counts(), m.percent())
	if m.note != "" {
		s += " " + m.note
	}
	fmt.Fprint(m.w, s+"\x1b[K")
	m.last, m.shown, m.drawn = t, true, true
}

// line prints "label: done/total unit (pct%, elapsed): note".
func (m *Meter) line(t time.Time) {
	s := fmt.Sprintf("%s: %s (%d%%, %v)", m.o.Label, m.counts(), m.percent(), t.Sub(m.start).Round(time.Second))
	if m.note != "" {
		s += ": " + m.note
	}
	fmt.Fprintln(m.w, s)
	m.last, m.shown = t, true
}
