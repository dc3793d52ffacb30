package report

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"math"
	"testing"
)

// FuzzChart feeds arbitrary float64 bit patterns (NaNs, infinities,
// subnormals, ±MaxFloat64) to every chart kind and both renderers: they
// must not panic, the SVG must parse, the PNG must decode at the chart's
// size, and the tick functions must return finite increasing ticks.
func FuzzChart(f *testing.F) {
	seed := func(vals ...float64) []byte {
		b := make([]byte, 0, 8*len(vals))
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	f.Add(seed(0, 1, 1, 2, 2, 4), uint8(0), uint8(0), uint16(200), uint16(120))
	f.Add(seed(math.NaN(), 1, math.Inf(1), 2, 3, math.Inf(-1)), uint8(1), uint8(1), uint16(0), uint16(0))
	f.Add(seed(-math.MaxFloat64, math.MaxFloat64, 0, math.SmallestNonzeroFloat64), uint8(2), uint8(7), uint16(150), uint16(100))
	f.Add(seed(1e16, 1e300, 1e16+2, -1e300, 5e-324, 0), uint8(3), uint8(3), uint16(101), uint16(100))
	f.Add([]byte{}, uint8(2), uint8(4), uint16(1), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, kind, flags uint8, w, h uint16) {
		vals := make([]float64, 0, len(data)/8)
		for i := 0; i+8 <= len(data) && len(vals) < 512; i += 8 {
			vals = append(vals, math.Float64frombits(binary.LittleEndian.Uint64(data[i:])))
		}
		c := &Chart{
			Title: "fuzz", XLabel: "x", YLabel: "y",
			Kind:    Kind(kind % 5), // 4 is not a kind: drawn as a line
			LogY:    flags&1 != 0,
			Markers: flags&2 != 0,
			// Small images: the fuzzer's time goes into inputs, not pixels.
			Width: int(w % 400), Height: int(h % 300),
		}
		if flags&4 != 0 {
			c.Categories = []string{"a", "b", "c"}
		}
		// Up to three series, alternating X and Y values; the third has
		// no X at all.
		for s := 0; s < 3 && len(vals) > 0; s++ {
			n := min(len(vals), 1+len(vals)/3)
			part := vals[:n]
			vals = vals[n:]
			ser := Series{Name: string(rune('A' + s))}
			for i, v := range part {
				if s < 2 && i%2 == 0 {
					ser.X = append(ser.X, v)
				} else {
					ser.Y = append(ser.Y, v)
				}
			}
			c.Series = append(c.Series, ser)
		}
		if flags&8 != 0 && len(c.Series) > 0 {
			c.Series = append(c.Series, CDF("cdf", c.Series[0].Y), Histogram("hist", c.Series[0].X, int(flags>>4)))
		}

		var sb, pb bytes.Buffer
		if err := c.SVG(&sb); err != nil {
			t.Fatal(err)
		}
		parseSVG(t, sb.Bytes())
		if err := c.PNG(&pb); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&pb)
		if err != nil {
			t.Fatal(err)
		}
		if cw, ch := c.size(); img.Bounds().Dx() != cw || img.Bounds().Dy() != ch {
			t.Fatalf("PNG %v, want %dx%d", img.Bounds(), cw, ch)
		}

		if len(c.Series) > 0 && len(c.Series[0].Y) >= 2 {
			a, b := c.Series[0].Y[0], c.Series[0].Y[1]
			checkTicks(t, "NiceTicks", NiceTicks(a, b, int(flags%12)))
			checkTicks(t, "LogTicks", LogTicks(a, b))
		}
	})
}

func checkTicks(t *testing.T, name string, ticks []float64) {
	if len(ticks) > 4*maxTicks+1 {
		t.Fatalf("%s: %d ticks", name, len(ticks))
	}
	for i, v := range ticks {
		if !finite(v) || (i > 0 && v <= ticks[i-1]) {
			t.Fatalf("%s: %v not finite and increasing", name, ticks)
		}
	}
	if labels := formatTicks(ticks); len(labels) != len(ticks) {
		t.Fatalf("%s: %d labels for %d ticks", name, len(labels), len(ticks))
	}
}
