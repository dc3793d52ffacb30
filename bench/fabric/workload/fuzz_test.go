package workload

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzParseCDF: whatever the input, ParseCDF returns an error or a CDF
// whose samples, quantiles and mean stay within its sizes.
func FuzzParseCDF(f *testing.F) {
	f.Add([]byte(webSearchText))
	f.Add([]byte(hawkeyeText))
	f.Add([]byte("100 0.5\n200 1\n"))
	f.Add([]byte("0 1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCDF(bytes.NewReader(data))
		if err != nil {
			if c != nil {
				t.Fatal("a CDF and an error")
			}
			return
		}
		sizes, probs := c.Points()
		lo, hi := sizes[0], sizes[len(sizes)-1]
		if probs[len(probs)-1] != 1 {
			t.Fatalf("last probability %v", probs[len(probs)-1])
		}
		m := c.Mean()
		if math.IsNaN(m) || m < lo*(1-1e-9) || m > hi*(1+1e-9) {
			t.Fatalf("mean %v outside [%v, %v]", m, lo, hi)
		}
		rng := rand.New(rand.NewPCG(1, 1))
		for range 16 {
			s := c.Sample(rng)
			if s < 1 || float64(s) > math.Max(math.Round(hi), 1) || float64(s) < math.Round(lo) {
				t.Fatalf("sample %d outside [%v, %v]", s, lo, hi)
			}
		}
		for _, u := range []float64{0, 0.5, 1} {
			if q := c.Quantile(u); math.IsNaN(q) || q < lo || q > hi {
				t.Fatalf("Quantile(%v) = %v", u, q)
			}
		}
		if p := c.Prob(hi); p != 1 {
			t.Fatalf("Prob(max) = %v", p)
		}
	})
}

// FuzzReadCSV: a flows file (a user's, or one a shard wrote) reads or is
// refused naming the line; what reads writes back and reads the same.
func FuzzReadCSV(f *testing.F) {
	f.Add([]byte("id,src,dst,size,start_ns,prio\n0,0,1,1000,0,3\n1,2,0,65536,100,1\n"))
	f.Add([]byte("src,dst,size,start_ns\n0,1,1,0\n"))
	f.Add([]byte("src,dst,size,start_ns\n-1,1,-5,-9223372036854775808\n"))
	f.Add([]byte("\"src\",dst\n\"0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		flows, err := ReadCSV(bytes.NewReader(data))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := WriteCSV(&b, flows); err != nil {
			return
		}
		again, err := ReadCSV(&b)
		if err != nil || len(again) != len(flows) {
			t.Fatalf("%d flows written read back as %d: %v", len(flows), len(again), err)
		}
	})
}
