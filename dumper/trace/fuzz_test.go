package trace

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdma-appliance/appliance/dpdk/header"
	"github.com/rdma-appliance/appliance/dumper/pcap"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// seedCopies adds restored and raw IPv4 and IPv6 copies, the junk frames of
// TestMergeMalformed and an empty frame.
func seedCopies(f *testing.F) {
	raw := newGen()
	raw.raw = true
	for seq := uint64(1); seq <= 4; seq++ {
		f.Add(newGen().make(seq).data)
		f.Add(raw.make(seq).data)
	}
	for _, j := range junk(f) {
		f.Add(j)
	}
	f.Add([]byte{})
}

// FuzzParseCopy feeds arbitrary frames to the dumped-frame parser and, for
// the ones it accepts, to the restore Merge applies: nothing may panic, and
// an accepted frame's metadata is the one its MACs and TTL hold.
func FuzzParseCopy(f *testing.F) {
	seedCopies(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var np header.Parsed
		m, dir, restore, reason := parseCopy(frame, &np, mirror.DefaultRewritePort)
		if reason != "" {
			return
		}
		if got := uint64(binary.BigEndian.Uint16(frame[0:2]))<<32 | uint64(binary.BigEndian.Uint32(frame[2:6])); uint64(m.Timestamp) != got {
			t.Fatalf("timestamp %d, dst MAC %d", m.Timestamp, got)
		}
		if m.Seq != seqOf(frame) {
			t.Fatalf("seq %d, src MAC %d", m.Seq, seqOf(frame))
		}
		if np.L3Proto != header.EtherTypeIPv4 && np.L3Proto != header.EtherTypeIPv6 || np.L4Proto != header.IPProtoUDP {
			t.Fatalf("accepted L3 %#x L4 %d", np.L3Proto, np.L4Proto)
		}
		if src, dst := dir.addrs(); !src.IsValid() || !dst.IsValid() {
			t.Fatal("invalid direction")
		}
		if restore {
			c := append([]byte(nil), frame...)
			if _, err := mirror.Restore(c, &np); err != nil {
				t.Fatalf("restore of an accepted copy: %v", err)
			}
			if len(c) != len(frame) || !bytes.Equal(c[:12], frame[:12]) {
				t.Fatal("restore changed the metadata")
			}
		}
	})
}

// FuzzMergeFile merges an arbitrary file as one dumper's output: the only
// error is an invalid test, and the report adds up.
func FuzzMergeFile(f *testing.F) {
	dir := f.TempDir()
	g := newGen()
	var pkts []pkt
	for seq := uint64(1); seq <= 6; seq++ {
		pkts = append(pkts, g.make(seq))
	}
	for i, opts := range []pcap.WriterOptions{{}, {Format: pcap.FormatPcapNG}} {
		p := writeFile(f, filepath.Join(dir, string(rune('a'+i))), pkts, opts)
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-7])
	}
	f.Add([]byte{})
	path := filepath.Join(dir, "fuzz.pcap")
	attributionBudget = 1 << 12 // a garbage sequence number makes a gap of up to 2^48
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w, err := pcap.NewWriter(&out, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet})
		if err != nil {
			t.Fatal(err)
		}
		opts := Options{Mirrored: Unknown, RxRoCE: Unknown, FirstSeq: 1, Assign: func(uint64) string { return "d0" }}
		rep, err := Merge(context.Background(), []Source{{Name: "d0", Path: path}}, w, opts)
		if err != nil && !errors.Is(err, ErrInvalidTest) {
			t.Fatalf("error %v", err)
		}
		if rep == nil || len(rep.Sources) != 1 || len(rep.Conditions) != NumConditions {
			t.Fatalf("report %+v", rep)
		}
		fs := rep.Sources[0].Files[0]
		if fs.Packets != rep.Packets || fs.Malformed != rep.Malformed || rep.Valid != (err == nil) {
			t.Fatalf("report does not add up: %+v", rep)
		}
	})
}
