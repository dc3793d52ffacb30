package tuning

import (
	"fmt"
	"math"
	"sort"
)

// Baseline is a named watermark preset from the paper's Tables 2 and 3.
type Baseline struct {
	Name   string    `json:"name"`
	Source string    `json:"source"`
	W      Watermark `json:"watermark"`
}

// kb is kilobytes (1000 bytes, as the tables write them) in cells.
func kb(v float64, cell int64) int64 { return int64(math.Round(v * 1000 / float64(cell))) }

// alphaUnits is a dynamic-threshold fraction in the space's alpha units.
func alphaUnits(frac float64) float64 { return frac / AlphaUnit }

// DCTCPK is DCTCP's marking threshold rule K > C x RTT / 7 (Eq. 2) in
// cells: the smallest whole number of cells above it.
func DCTCPK(capacityBps float64, rttNs int64, cell int64) int64 {
	k := capacityBps * float64(rttNs) / 1e9 / 8 / 7
	return int64(math.Floor(k/float64(cell))) + 1
}

// Baselines are the presets to compare against, in cells of cell bytes,
// for a bottleneck of capacityBps with round trip rttNs:
//
//   - dcqcn: Table 2 and 3's DCQCN (Kmin 5 KB, Kmax 200 KB, Pmax 1% at
//     40G; headroom 22.4 KB; beta 8 as the dynamic threshold);
//   - hpcc: HPCC's DCQCN settings at 25G (Kmin 100 KB, Kmax 400 KB; the
//     table leaves Pmax open, HPCC's simulations use 20%) with alpha 1/8;
//   - dctcp: K > C x RTT / 7 with Kmin = Kmax = K and Pmax 100% (Table 2),
//     vendor PFC;
//   - vendor: a switch vendor's RoCE recommendation (Kmin 150 KB, Kmax
//     1500 KB, Pmax 100%; headroom from Eq. 5 for 100G and 1 us cables,
//     about 200 cells; alpha 1/8);
//   - experience: the rules of Section 3 (PFC above ECN, Kmax well below
//     XOFF, a moderate marking probability) as one fixed point: Kmin 1000,
//     Kmax 1500 cells, Pmax 20%, headroom 300 cells, alpha 5. The paper's
//     ByteDance benchmark is not published; this is our reading of it.
func Baselines(cell int64, capacityBps float64, rttNs int64) []Baseline {
	vendorHeadroom := int64(200 * PaperCell / cell)
	k := DCTCPK(capacityBps, rttNs, cell)
	return []Baseline{
		{"dcqcn", "Table 2/3: DCQCN (2015)", Watermark{Kmin: kb(5, cell), Kmax: kb(200, cell), Pmax: 1, Headroom: kb(22.4, cell), Alpha: alphaUnits(8)}},
		{"hpcc", "Table 2/3: HPCC (2019)", Watermark{Kmin: kb(100, cell), Kmax: kb(400, cell), Pmax: 20, Headroom: vendorHeadroom, Alpha: alphaUnits(1.0 / 8)}},
		{"dctcp", fmt.Sprintf("Table 2: DCTCP rule K > C x RTT / 7 (C %.0fG, RTT %.1f us)", capacityBps/1e9, float64(rttNs)/1e3),
			Watermark{Kmin: k, Kmax: k, Pmax: 100, Headroom: vendorHeadroom, Alpha: alphaUnits(1.0 / 8)}},
		{"vendor", "vendor-recommended RoCE watermarks", Watermark{Kmin: kb(150, cell), Kmax: kb(1500, cell), Pmax: 100, Headroom: vendorHeadroom, Alpha: alphaUnits(1.0 / 8)}},
		{"experience", "experience-based (Section 3's rules)", Watermark{Kmin: 1000 * PaperCell / cell, Kmax: 1500 * PaperCell / cell, Pmax: 20, Headroom: 300 * PaperCell / cell, Alpha: 5}},
	}
}

// BaselineNames are the presets' names.
func BaselineNames() []string {
	var out []string
	for _, b := range Baselines(PaperCell, 25e9, 8000) {
		out = append(out, b.Name)
	}
	sort.Strings(out)
	return out
}

// BaselineConfig is the named preset applied to every scope.
func BaselineConfig(name string, cell int64, capacityBps float64, rttNs int64, scopes ...string) (Config, error) {
	for _, b := range Baselines(cell, capacityBps, rttNs) {
		if b.Name == name {
			return Uniform(cell, b.W, scopes...), nil
		}
	}
	return Config{}, fmt.Errorf("baseline %q: one of %v", name, BaselineNames())
}
