package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/internal/service"
)

var dtaQueryCmd = &Command{
	Name:    "query",
	Summary: "query a DTA collector: Key-Write, Key-Increment, sketches, postcards, lists, stats",
	Usage:   "[--collector ADDR] [--json] [--consensus K] [--recent N] WHAT [ARGS]",
	Long: `Asks a collector ('appliance dta collect') over its HTTP API; the collector answers by reading
the memory translators wrote into. WHAT is one of:

  keywrite KEY              the key's data from its N Key-Write slots (checksum-checked);
                            --consensus K answers only when K slots agree
  keyincrement KEY          the key's count: the minimum of its N counters
  sketch ID count KEY       a Count-Min sketch's point count (an upper bound)
  sketch ID cardinality     a HyperLogLog sketch's distinct-key estimate
  postcard KEY [HOP...]     a flow's path: each hop's postcard data, and the hops missing when
                            the record was written before every hop reported; with HOPs (the
                            path expected, one value per hop) every reported hop is checked
                            and a hop that differs is an error
  list ID                   an Append list: entries read, rate, pollers, the latest --recent entries
  stats                     connections, push notifications, lists, memory
  regions                   what the collector offers translators (address, MTU, regions)
  connections               the translators connected now

Keys are decimal, 0x-hex or dotted IPv4 addresses. A key that is not in memory, an unknown
list or sketch and a primitive the collector does not serve are errors saying so (exit 1).

Examples:
  appliance dta query keywrite 10.0.0.1
  appliance dta query --consensus 2 keywrite 0x1234
  appliance dta query --collector 10.1.0.5:9300 sketch 7 count 42
  appliance dta query --json list 1
  appliance dta query postcard 42 101 102 103 104 105`,
	Flags: dtaQueryFlags,
}

type dtaQueryOptions struct {
	addr              string
	json              bool
	consensus, recent int
	args              []string
}

func dtaQueryFlags(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
	var o dtaQueryOptions
	fs.StringVar(&o.addr, "collector", dtacollector.DefaultListen, "the collector's HTTP address")
	fs.BoolVar(&o.json, "json", false, "print the answer as JSON")
	fs.IntVar(&o.consensus, "consensus", 0, "keywrite: answer only when this many of the N slots agree")
	fs.IntVar(&o.recent, "recent", 0, "list: how many of the latest entries to show (0: the list's setting)")
	return bind(&o, &o.args, runDtaQuery)
}

func runDtaQuery(ctx context.Context, env *Env, o dtaQueryOptions) error {
	q, err := dtacollector.ParseQuery(o.args, dtacollector.QueryOptions{Consensus: o.consensus, Recent: o.recent})
	if err != nil {
		return Usagef("%v", err)
	}
	if err := service.NewClient(o.addr).Do(ctx, "GET", q.Path, nil, q.Answer); err != nil {
		return err
	}
	if o.json {
		return writeJSON(env.Stdout, q.Answer)
	}
	showAnswer(env.Stdout, q.Answer)
	return nil
}

// showAnswer prints a collector's answer for people.
func showAnswer(w io.Writer, v any) {
	switch r := v.(type) {
	case *dtacollector.KeyWriteResult:
		fmt.Fprintf(w, "key %d: data %x (%d); %d of %d slots hold the key, %d agree\n", r.Key, []byte(r.Data), r.Value, r.Matching, r.N, r.Agreeing)
	case *dtacollector.KeyIncrementResult:
		fmt.Fprintf(w, "key %d: count %d (the least of %d counters)\n", r.Key, r.Count, r.N)
	case *dtacollector.SketchCountResult:
		fmt.Fprintf(w, "sketch %d, key %d: count %d (count-min: at most this)\n", r.Sketch, r.Key, r.Count)
	case *dtacollector.CardinalityResult:
		fmt.Fprintf(w, "sketch %d: about %.0f distinct keys (%d HyperLogLog registers)\n", r.Sketch, r.Cardinality, r.Registers)
	case *dtacollector.PostcardResult:
		showPostcard(w, r)
	case *dtacollector.ListStatus:
		showList(w, r, true)
	case *dtacollector.Stats:
		showStats(w, r)
	case *dtacollector.RegionsInfo:
		showRegions(w, r)
	case *[]dtacollector.ConnState:
		showConnections(w, *r)
	}
}

func showPostcard(w io.Writer, r *dtacollector.PostcardResult) {
	hops := make([]string, len(r.Hops))
	for i, h := range r.Hops {
		if r.Mask&(1<<i) == 0 {
			hops[i] = "-"
		} else {
			hops[i] = strconv.FormatUint(uint64(h), 10)
		}
	}
	state := "complete"
	if !r.Complete {
		miss := make([]string, len(r.Missing))
		for i, h := range r.Missing {
			miss[i] = strconv.Itoa(h)
		}
		state = fmt.Sprintf("incomplete: %d of %d hops, missing hop %s: written before they reported", r.Reported, len(r.Hops), strings.Join(miss, ", "))
	}
	if r.Expected != nil {
		state += "; every reported hop as expected"
	}
	fmt.Fprintf(w, "flow %d: %s (%s)\n", r.Key, strings.Join(hops, " "), state)
}

func showStats(w io.Writer, st *dtacollector.Stats) {
	fmt.Fprintf(w, "collector %s, up %s: %d translators connected (%d connections so far, %d refused), %d push notifications\n",
		st.Name, st.Uptime, st.Connections, st.Connects, st.Refused, st.Pushes)
	for _, p := range st.RecentPush {
		fmt.Fprintf(w, "  push: key %d from %s at %s\n", p.Key, p.Translator, p.Time.Format("15:04:05.000000"))
	}
	for i := range st.Lists {
		showList(w, &st.Lists[i], false)
	}
	showMemory(w, st.Memory)
}

func showRegions(w io.Writer, r *dtacollector.RegionsInfo) {
	fmt.Fprintf(w, "collector %s at %s (%s): MTU %d, %d responder resources, queries with N=%d\n",
		r.Name, r.IP, r.MAC, r.MTU, r.MaxAtomic, r.Redundancy)
	g := r.Regions
	if kw := g.KeyWrite; kw != nil {
		fmt.Fprintf(w, "  key-write: %d slots of %d data bytes\n", kw.Slots, kw.DataWidth)
	}
	if ki := g.KeyIncrement; ki != nil {
		fmt.Fprintf(w, "  key-increment: %d counters\n", ki.Slots)
	}
	for _, id := range slices.Sorted(maps.Keys(g.Lists)) {
		fmt.Fprintf(w, "  append list %d: %d entries, batch %d\n", id, g.Lists[id].Entries, g.Batch)
	}
	for _, id := range slices.Sorted(maps.Keys(g.Sketches)) {
		s := g.Sketches[id]
		fmt.Fprintf(w, "  sketch %d: %s, %d columns x %d rows, %d reporters\n", id, dtacollector.SketchKindName(s.Kind), s.Columns, s.Rows, s.Reporters)
	}
	if p := g.Postcards; p != nil {
		fmt.Fprintf(w, "  postcards: %d flows of %d hops\n", p.Slots, p.Hops)
	}
	showMemory(w, r.Memory)
}

func showConnections(w io.Writer, conns []dtacollector.ConnState) {
	if len(conns) == 0 {
		fmt.Fprintln(w, "no translator connected")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSLATOR\tIP\tTHEIR QPN\tQPN\tSTATE\tPUSHES\tSINCE")
	for _, c := range conns {
		fmt.Fprintf(tw, "%s\t%s\t%#x\t%#x\t%s\t%d\t%s\n", c.Translator, c.IP, c.TranslatorQPN, c.QPN, c.State, c.Pushes, c.Since.Format("2006-01-02 15:04:05"))
	}
	tw.Flush()
}

func showList(w io.Writer, l *dtacollector.ListStatus, entries bool) {
	fmt.Fprintf(w, "list %d: %d entries read (ring of %d, batch %d), %.0f entries/s;", l.ID, l.Read, l.Entries, l.Batch, l.Rate)
	for _, p := range l.Pollers {
		core := "unpinned"
		if p.Core >= 0 {
			core = "core " + strconv.Itoa(p.Core)
		}
		fmt.Fprintf(w, " poller %d (%s) %d", p.Index, core, p.Read)
	}
	fmt.Fprintln(w)
	if entries {
		for _, e := range l.Recent {
			fmt.Fprintf(w, "  %d: %d (%#08x)\n", e.Pos, e.Data, e.Data)
		}
	}
}

func showMemory(w io.Writer, mem []dtacollector.Memory) {
	for _, m := range mem {
		fmt.Fprintf(w, "  memory %s: %d bytes, rkey %#x\n", m.Primitive, m.Bytes, m.RKey)
	}
}
