package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/internal/service"
)

func init() {
	dtaCmd.Sub = append(dtaCmd.Sub, &Command{
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
  postcard KEY              a flow's path: each hop's postcard data
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
  appliance dta query --json list 1`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			addr := fs.String("collector", dtacollector.DefaultListen, "the collector's HTTP address")
			asJSON := fs.Bool("json", false, "print the answer as JSON")
			consensus := fs.Int("consensus", 0, "keywrite: answer only when this many of the N slots agree")
			recent := fs.Int("recent", 0, "list: how many of the latest entries to show (0: the list's setting)")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) == 0 {
					return Usagef("what to query? keywrite, keyincrement, sketch, postcard, list, stats, regions or connections")
				}
				q, err := dtaQueryFor(args, *consensus, *recent)
				if err != nil {
					return err
				}
				out := q.out()
				if err := service.NewClient(*addr).Do(ctx, "GET", q.path, nil, out); err != nil {
					return err
				}
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(out)
				}
				q.show(env.Stdout, out)
				return nil
			}
		},
	})
}

// dtaQuery is one query: its path, the answer's type and how to print it.
type dtaQuery struct {
	path string
	out  func() any
	show func(w io.Writer, v any)
}

func dtaQueryFor(args []string, consensus, recent int) (*dtaQuery, error) {
	want := func(n int, usage string) error {
		if len(args) != n {
			return Usagef("want %s", usage)
		}
		return nil
	}
	key := func(s string) (string, error) {
		if _, err := dtacollector.ParseKey(s); err != nil {
			return "", Usagef("%v", err)
		}
		return url.PathEscape(s), nil
	}
	switch args[0] {
	case "keywrite":
		if err := want(2, "keywrite KEY"); err != nil {
			return nil, err
		}
		k, err := key(args[1])
		if err != nil {
			return nil, err
		}
		p := "/v1/keywrite/" + k
		if consensus > 0 {
			p += "?consensus=" + strconv.Itoa(consensus)
		}
		return &dtaQuery{path: p, out: func() any { return new(dtacollector.KeyWriteResult) }, show: func(w io.Writer, v any) {
			r := v.(*dtacollector.KeyWriteResult)
			fmt.Fprintf(w, "key %d: data %x (%d); %d of %d slots hold the key, %d agree\n", r.Key, []byte(r.Data), r.Value, r.Matching, r.N, r.Agreeing)
		}}, nil
	case "keyincrement":
		if err := want(2, "keyincrement KEY"); err != nil {
			return nil, err
		}
		k, err := key(args[1])
		if err != nil {
			return nil, err
		}
		return &dtaQuery{path: "/v1/keyincrement/" + k, out: func() any { return new(dtacollector.KeyIncrementResult) }, show: func(w io.Writer, v any) {
			r := v.(*dtacollector.KeyIncrementResult)
			fmt.Fprintf(w, "key %d: count %d (the least of %d counters)\n", r.Key, r.Count, r.N)
		}}, nil
	case "sketch":
		if len(args) < 3 {
			return nil, Usagef("want sketch ID count KEY or sketch ID cardinality")
		}
		id := url.PathEscape(args[1])
		switch args[2] {
		case "count":
			if err := want(4, "sketch ID count KEY"); err != nil {
				return nil, err
			}
			k, err := key(args[3])
			if err != nil {
				return nil, err
			}
			return &dtaQuery{path: "/v1/sketches/" + id + "/count/" + k, out: func() any { return new(dtacollector.SketchCountResult) }, show: func(w io.Writer, v any) {
				r := v.(*dtacollector.SketchCountResult)
				fmt.Fprintf(w, "sketch %d, key %d: count %d (count-min: at most this)\n", r.Sketch, r.Key, r.Count)
			}}, nil
		case "cardinality":
			if err := want(3, "sketch ID cardinality"); err != nil {
				return nil, err
			}
			return &dtaQuery{path: "/v1/sketches/" + id + "/cardinality", out: func() any { return new(dtacollector.CardinalityResult) }, show: func(w io.Writer, v any) {
				r := v.(*dtacollector.CardinalityResult)
				fmt.Fprintf(w, "sketch %d: about %.0f distinct keys (%d HyperLogLog registers)\n", r.Sketch, r.Cardinality, r.Registers)
			}}, nil
		}
		return nil, Usagef("sketch %s %s: want count KEY or cardinality", args[1], args[2])
	case "postcard":
		if err := want(2, "postcard KEY"); err != nil {
			return nil, err
		}
		k, err := key(args[1])
		if err != nil {
			return nil, err
		}
		return &dtaQuery{path: "/v1/postcards/" + k, out: func() any { return new(dtacollector.PostcardResult) }, show: func(w io.Writer, v any) {
			r := v.(*dtacollector.PostcardResult)
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
				state = "incomplete: written before every hop reported"
			}
			fmt.Fprintf(w, "flow %d: %s (%s)\n", r.Key, strings.Join(hops, " "), state)
		}}, nil
	case "list":
		if err := want(2, "list ID"); err != nil {
			return nil, err
		}
		p := "/v1/lists/" + url.PathEscape(args[1])
		if recent > 0 {
			p += "?recent=" + strconv.Itoa(recent)
		}
		return &dtaQuery{path: p, out: func() any { return new(dtacollector.ListStatus) }, show: func(w io.Writer, v any) {
			showList(w, v.(*dtacollector.ListStatus), true)
		}}, nil
	case "stats":
		if err := want(1, "stats"); err != nil {
			return nil, err
		}
		return &dtaQuery{path: "/v1/stats", out: func() any { return new(dtacollector.Stats) }, show: func(w io.Writer, v any) {
			st := v.(*dtacollector.Stats)
			fmt.Fprintf(w, "collector %s, up %s: %d translators connected (%d connections so far, %d refused), %d push notifications\n",
				st.Name, st.Uptime, st.Connections, st.Connects, st.Refused, st.Pushes)
			for _, p := range st.RecentPush {
				fmt.Fprintf(w, "  push: key %d from %s at %s\n", p.Key, p.Translator, p.Time.Format("15:04:05.000000"))
			}
			for i := range st.Lists {
				showList(w, &st.Lists[i], false)
			}
			showMemory(w, st.Memory)
		}}, nil
	case "regions":
		if err := want(1, "regions"); err != nil {
			return nil, err
		}
		return &dtaQuery{path: "/v1/regions", out: func() any { return new(dtacollector.RegionsInfo) }, show: func(w io.Writer, v any) {
			r := v.(*dtacollector.RegionsInfo)
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
		}}, nil
	case "connections":
		if err := want(1, "connections"); err != nil {
			return nil, err
		}
		return &dtaQuery{path: "/v1/connections", out: func() any { return new([]dtacollector.ConnState) }, show: func(w io.Writer, v any) {
			conns := *v.(*[]dtacollector.ConnState)
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
		}}, nil
	}
	return nil, Usagef("unknown query %q: want keywrite, keyincrement, sketch, postcard, list, stats, regions or connections", args[0])
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
