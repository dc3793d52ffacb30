package hawkeyeeval

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdma-appliance/appliance/internal/topo"
)

// Topology is a k-ary fat-tree of 100 Gbps links with 2 us delay, the
// paper's evaluation fabric (it used k=4; larger k are where Hawkeye's
// savings over full polling show).
type Topology struct{ K int }

// Topologies are the fabrics the evaluation knows by name.
var Topologies = []Topology{{4}, {8}, {16}}

func (t Topology) String() string { return "k" + strconv.Itoa(t.K) }

// ParseTopology reads a topology name: k4, k8 or k16.
func ParseTopology(s string) (Topology, error) {
	return parseName(s, "topology", "fat-trees", Topologies)
}

// ParseAnomaly reads an anomaly type by its table name.
func ParseAnomaly(s string) (Anomaly, error) { return parseName(s, "anomaly", "types", Anomalies) }

// ParseMethod reads a method by its table name.
func ParseMethod(s string) (Method, error) { return parseName(s, "method", "methods", Methods) }

// parseName finds s among the names of all, or says which there are.
func parseName[T fmt.Stringer](s, what, them string, all []T) (T, error) {
	var names []string
	for _, x := range all {
		if s == x.String() {
			return x, nil
		}
		names = append(names, x.String())
	}
	var zero T
	return zero, fmt.Errorf("unknown %s %q: the %s are %s", what, s, them, strings.Join(names, ", "))
}

// fatTree names the parts of a generated fat-tree (topo.FatTree's
// numbering): host i hangs off ToR i/half; ToR t and aggregation switch a
// belong to pod t/half and a/half; aggregation switch j of each pod
// connects to cores j*half .. j*half+half-1.
type fatTree struct {
	g    *topo.Graph
	k    int
	half int
}

func newFatTree(k int) (*fatTree, error) {
	g, err := topo.FatTree(k, evalBW, evalDelay)
	if err != nil {
		return nil, err
	}
	return &fatTree{g: g, k: k, half: k / 2}, nil
}

func (f *fatTree) hosts() int { return f.k * f.k * f.k / 4 }

func (f *fatTree) node(name string) int {
	i, ok := f.g.Node(name)
	if !ok {
		panic("hawkeyeeval: no node " + name)
	}
	return i
}

func (f *fatTree) host(i int) int { return f.node("h" + strconv.Itoa(i)) }

// torOf and podOf locate host i.
func (f *fatTree) torOf(i int) int { return i / f.half }
func (f *fatTree) podOf(i int) int { return i / (f.half * f.half) }

func (f *fatTree) torName(t int) string      { return "tor" + strconv.Itoa(t) }
func (f *fatTree) aggName(pod, j int) string { return "agg" + strconv.Itoa(pod*f.half+j) }
func (f *fatTree) coreName(j, x int) string  { return "core" + strconv.Itoa(j*f.half+x) }

// hostsOfTor are the host numbers under ToR t.
func (f *fatTree) hostsOfTor(t int) []int {
	out := make([]int, f.half)
	for i := range out {
		out[i] = t*f.half + i
	}
	return out
}

// portTo is node a's port to node b, -1 when they are not linked.
func (f *fatTree) portTo(a, b int) int {
	for p, ref := range f.g.Ports(a) {
		if ref.Peer == b {
			return p
		}
	}
	return -1
}

// The types marshal as their names, in shard files and the --json output.

func (t Topology) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

func (t *Topology) UnmarshalText(b []byte) (err error) {
	*t, err = ParseTopology(string(b))
	return err
}

func (a Anomaly) MarshalText() ([]byte, error) {
	if a == NoAnomaly {
		return []byte("none"), nil
	}
	return []byte(a.String()), nil
}

func (a *Anomaly) UnmarshalText(b []byte) (err error) {
	if string(b) == "none" {
		*a = NoAnomaly
		return nil
	}
	*a, err = ParseAnomaly(string(b))
	return err
}

func (m Method) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

func (m *Method) UnmarshalText(b []byte) (err error) {
	*m, err = ParseMethod(string(b))
	return err
}
