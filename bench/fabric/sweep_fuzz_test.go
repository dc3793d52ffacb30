package fabric

import (
	"os"
	"testing"
)

// FuzzSweepParam: any --set argument and any value, applied to a
// scenario file, parse or fail with an error; nothing panics.
func FuzzSweepParam(f *testing.F) {
	data, err := os.ReadFile("testdata/incast.yml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"switch.ecn.kmin=5KB,50KB", "workload[0].load=0.3", "workload[1].senders[2]=h3",
		"a..b=1", "[0]=1", "workload[x]=1", "switch=1", "seed=2", "k=", "=v", "host.mtu=1024,2048,4096"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		p, err := ParseSweepParam(arg)
		if err != nil {
			return
		}
		for _, pt := range SweepPoints([]SweepParam{p}, 1) {
			_, _ = sweepScenario("incast.yml", data, pt)
		}
	})
}
