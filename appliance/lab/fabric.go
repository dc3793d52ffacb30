package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rdma-appliance/appliance/bench/fabric"
	"github.com/rdma-appliance/appliance/internal/spec"
)

// FabricSpec configures the fabric stage: an N-to-1 incast over web-search
// background traffic on a leaf-spine, PFC and DCQCN on, run twice.
type FabricSpec struct {
	Enabled  bool    `yaml:"enabled"`
	Senders  int     `yaml:"senders"`
	Size     string  `yaml:"size"`
	Bursts   int     `yaml:"bursts"`
	Load     float64 `yaml:"load"`
	Duration string  `yaml:"duration"`
}

func (v *FabricSpec) validate(d *spec.Doc) {
	if !v.Enabled {
		return
	}
	if v.Senders < 2 || v.Senders > 15 {
		d.Errorf("fabric.senders", "must be 2..15 (the other leaf's hosts), got %d", v.Senders)
	}
	if n, err := spec.ParseSize(v.Size); err != nil || n <= 0 {
		d.Errorf("fabric.size", "%q: a positive size such as 256KB", v.Size)
	}
	if v.Bursts < 1 || v.Bursts > 1000 {
		d.Errorf("fabric.bursts", "must be 1..1000, got %d", v.Bursts)
	}
	if v.Load < 0 || v.Load > 0.9 {
		d.Errorf("fabric.load", "must be 0..0.9, got %g", v.Load)
	}
	if dur, err := time.ParseDuration(v.Duration); err != nil || dur <= 0 || dur > time.Second {
		d.Errorf("fabric.duration", "%q: up to 1s of simulated time", v.Duration)
	}
}

// scenario is the stage's scenario file.
func (v *FabricSpec) scenario() []byte {
	var snd []string
	for i := range v.Senders {
		snd = append(snd, fmt.Sprintf("h%d", 16+i))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `seed: 1
duration: %s
sample-interval: 10us
topology: {kind: leaf-spine, leaves: 2, spines: 2, hosts-per-leaf: 16, bandwidth: 100G, delay: 1us}
switch: {buffer: 16MB, alpha: 0.125, headroom: 64KB, lossless: [3], ecn: {kmin: 5KB, kmax: 200KB, pmax: 0.1}}
host: {mtu: 1024, dcqcn: true}
workload:
  - {kind: incast, senders: [%s], dst: h0, size: %s, bursts: %d, interval: 100us}
`, v.Duration, strings.Join(snd, ", "), v.Size, v.Bursts)
	if v.Load > 0 {
		fmt.Fprintf(&b, "  - {kind: poisson, load: %g, cdf: web-search}\n", v.Load)
	}
	return []byte(b.String())
}

// runFabric simulates the incast twice: PFC must keep it lossless while
// DCQCN draws CNPs, every incast flow must finish, and the two runs must
// give byte-identical results.
func runFabric(ctx context.Context, l *Lab, row *Row) error {
	v := l.Spec.Fabric
	yml := v.scenario()
	if err := os.WriteFile(l.Path("fabric-scenario.yml"), yml, 0o644); err != nil {
		return err
	}
	var outs [2][]byte
	var res *fabric.Results
	var wall time.Duration
	for i := range outs {
		sc, err := fabric.DecodeScenario("<lab fabric scenario>", yml)
		if err != nil {
			return err
		}
		s, dur, err := sc.Build()
		if err != nil {
			return err
		}
		var series bytes.Buffer
		s.SetSeries(&series)
		t0 := time.Now()
		if res, err = s.Run(ctx, dur); err != nil {
			return err
		}
		wall = time.Since(t0)
		var b bytes.Buffer
		if err := res.WriteJSON(&b); err != nil {
			return err
		}
		outs[i] = append(b.Bytes(), series.Bytes()...)
		if i == 0 {
			if err := os.WriteFile(l.Path("fabric-results.json"), b.Bytes(), 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(l.Path("fabric-series.csv"), series.Bytes(), 0o644); err != nil {
				return err
			}
		}
	}
	size, _ := spec.ParseSize(v.Size)
	senders := map[string]bool{}
	for i := range v.Senders {
		senders[fmt.Sprintf("h%d", 16+i)] = true
	}
	incast, incastDone, done := 0, 0, 0
	for _, f := range res.Flows {
		if f.Done {
			done++
		}
		// The incast's flows: from its senders to h0, of its size, at a
		// burst's start.
		if f.Dst == "h0" && senders[f.Src] && f.Size == size && f.Start%100_000 == 0 {
			incast++
			if f.Done {
				incastDone++
			}
		}
	}
	st := res.Stats
	row.Ran = fmt.Sprintf("%d-to-1 incast (%d bursts of %s) over web-search at %.0f%% load on a 2x2 leaf-spine of 100G, PFC and DCQCN on, %s simulated, twice",
		v.Senders, v.Bursts, v.Size, 100*v.Load, v.Duration)
	row.Figure("flows", "%d/%d", done, len(res.Flows))
	row.Figure("incast_done", "%d/%d", incastDone, incast)
	row.Figure("p99_fct", "%v", time.Duration(res.FCTPercentile(99)))
	row.Figure("drops", "%d", st.Drops)
	row.Figure("pfc_xoff", "%d", st.PauseFrames)
	row.Figure("cnps", "%d", st.CNPs)
	row.Figure("hops_per_s", "%.2fM", float64(st.Hops)/wall.Seconds()/1e6)
	same := bytes.Equal(outs[0], outs[1])
	row.Figure("deterministic", "%v", same)
	switch {
	case st.Drops != 0:
		return fmt.Errorf("lossless class dropped %d packets", st.Drops)
	case st.CNPs == 0:
		return fmt.Errorf("no CNP: DCQCN never engaged")
	case incastDone != incast || incast == 0:
		return fmt.Errorf("%d of %d incast flows finished", incastDone, incast)
	case !same:
		return fmt.Errorf("two runs of one seed differ")
	}
	row.Pass = true
	return nil
}
