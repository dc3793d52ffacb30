package report

import (
	"io"
	"math"
	"testing"
)

// BenchmarkChart10k renders a 10,000-point line chart (two series of
// 5,000, like a per-QP rate sampled every millisecond for five seconds)
// to each format.
func BenchmarkChart10k(b *testing.B) {
	c := &Chart{Title: "10k points", XLabel: "time (ms)", YLabel: "Gbit/s"}
	for s := 0; s < 2; s++ {
		ser := Series{Name: "QP " + string(rune('1'+s))}
		for i := 0; i < 5000; i++ {
			x := float64(i)
			ser.X = append(ser.X, x)
			ser.Y = append(ser.Y, 50+40*math.Sin(x/300+float64(s))+5*math.Sin(x/7))
		}
		c.Series = append(c.Series, ser)
	}
	for _, f := range []struct {
		name   string
		render func(io.Writer) error
	}{{"SVG", c.SVG}, {"PNG", c.PNG}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			cw := &countWriter{}
			for b.Loop() {
				cw.n = 0
				if err := f.render(cw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "charts/s")
			b.ReportMetric(float64(cw.n), "bytes/chart")
		})
	}
}

type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}
