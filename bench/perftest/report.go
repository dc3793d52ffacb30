package perftest

import (
	"fmt"
	"io"
	"strings"

	"github.com/rdma-appliance/appliance/verbs"
)

const rule = "---------------------------------------------------------------------------------------"

// Units of the bandwidth columns, as perftest's: MB is 2^20 bytes, Gb 10^9
// bits.
const (
	mbPerSec = 1 << 20
	gbPerSec = 125_000_000
)

// BWIn converts bytes per second to the report's unit.
func BWIn(bps float64, gbits bool) float64 {
	if gbits {
		return bps / gbPerSec
	}
	return bps / mbPerSec
}

func (s *side) printf(format string, a ...any) {
	if s.out != nil {
		fmt.Fprintf(s.out, format, a...)
	}
}

// perftestGID prints a GID as perftest does: every byte in decimal, two
// digits wide.
func perftestGID(g verbs.GID) string {
	parts := make([]string, len(g))
	for i, b := range g {
		parts[i] = fmt.Sprintf("%02d", b)
	}
	return strings.Join(parts, ":")
}

func (s *side) printHeader() {
	p, e := s.p, s.e
	s.printf("%s\n", rule)
	s.printf("%*s\n", 20+len(p.Title()), p.Title())
	s.printf(" Dual-port       : OFF\t\tDevice         : %s\n", e.info.Name)
	s.printf(" Number of qps   : %d\t\tTransport type : IB\n", p.QPs)
	s.printf(" Connection type : RC\t\tUsing SRQ      : OFF\n")
	if !p.Latency || !s.client || p.Verb == Read || p.Verb == Atomic {
		s.printf(" TX depth        : %d\n", p.TxDepth)
	}
	if p.usesRecv() && !s.client {
		s.printf(" RX depth        : %d\n", min(p.RxDepth, p.Iters))
	}
	if !p.Latency {
		s.printf(" CQ Moderation   : %d\n", p.CQMod)
	}
	s.printf(" Mtu             : %d[B]\n", e.mtu.Bytes())
	s.printf(" Link type       : Ethernet\n")
	s.printf(" GID index       : %d\n", s.cfg.GIDIndex)
	if p.Verb == Write || p.Verb == Send {
		s.printf(" Max inline data : %d[B]\n", e.inl)
	}
	s.printf(" rdma_cm QPs\t : OFF\n")
	s.printf(" Data ex. method : Ethernet\n")
	s.printf("%s\n", rule)
	for i := range e.local {
		for _, a := range []struct {
			who string
			q   QPInfo
		}{{"local", e.local[i]}, {"remote", s.remote[i]}} {
			s.printf(" %s address: LID %04x QPN %#06x PSN %#08x RKey %#08x VAddr %#016x\n", a.who, a.q.LID, a.q.QPN,
				a.q.PSN, a.q.RKey, a.q.VAddr)
			s.printf(" GID: %s\n", perftestGID(a.q.GID))
		}
	}
	s.printf("%s\n", rule)
}

func (s *side) printTitle() {
	if s.p.Latency {
		s.printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec] \n")
		return
	}
	u := "MB/sec"
	if s.p.Gbits {
		u = "Gb/sec"
	}
	s.printf(" #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n", u, u)
}

func (s *side) printRow(r Result) {
	if s.out == nil {
		return
	}
	WriteRow(s.out, r, s.p.Gbits)
}

// WriteRow prints one result in perftest's columns.
func WriteRow(w io.Writer, r Result, gbits bool) {
	if r.Lat != nil {
		l := r.Lat
		fmt.Fprintf(w, " %-7d %-10d %-7.2f        %-7.2f      %-7.2f          %-7.2f          %-7.2f         %-7.2f                %-7.2f\n",
			r.Bytes, r.Iters, l.Min, l.Max, l.Typical, l.Avg, l.Stdev, l.P99, l.P999)
		return
	}
	fmt.Fprintf(w, " %-7d    %-10d       %-7.2f            %-7.2f            %-7.6f\n", r.Bytes, r.Iters,
		BWIn(r.PeakBps, gbits), BWIn(r.AvgBps, gbits), r.MsgRate/1e6)
}

func (s *side) printFooter(rows bool) {
	if rows {
		s.printf("%s\n", rule)
	}
}
