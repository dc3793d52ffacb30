package dtatranslator

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/rdma-appliance/appliance/internal/dtamem"
	"github.com/rdma-appliance/appliance/internal/dtawire"
	"github.com/rdma-appliance/appliance/verbs/roce"
)

// TestPublicLayoutWrites: with the regions' layout dta-public the
// translator's WRITEs land where the public DTA collector looks (slot n
// = CRC32-IEEE(key little-endian || n), checksum stored little-endian),
// byte for byte the memory dtamem lays out, at no allocation per report.
func TestPublicLayoutWrites(t *testing.T) {
	b := newCollectorBed(t, 100)
	b.regs.Layout = dtamem.LayoutPublic
	tr, err := NewTranslator(b.conn, b.regs)
	if err != nil {
		t.Fatal(err)
	}
	want := dtamem.NewKeyWriteTable(kwSlots, 2, 4)
	want.Layout = dtamem.LayoutPublic
	var vas []uint64
	emit := func(frame []byte) error {
		var p roce.Packet
		if roce.Parse(frame, &p) == nil && p.RETH(frame) != nil {
			vas = append(vas, p.RETH(frame).VA())
		}
		return b.emit(frame)
	}
	for _, k := range []uint32{0xdeadbeef, 1, 2, 0x0a000001, 77} {
		d := binary.BigEndian.AppendUint32(nil, k*5)
		want.Put(k, d)
		if err := tr.Translate(&dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: k, Data: d}, emit); err != nil {
			t.Fatal(err)
		}
		b.answers()
	}
	b.settle()
	le := binary.LittleEndian.AppendUint32(nil, 0xdeadbeef)
	for n, va := range vas[:2] {
		slot := uint64(crc32.ChecksumIEEE(append(le[:4:4], byte(n)))) & (kwSlots - 1)
		if va != b.regs.KeyWrite.Addr+slot*8 {
			t.Errorf("key 0xdeadbeef n %d: WRITE at %#x, want slot %d", n, va, slot)
		}
	}
	if got := b.mem[:kwSlots*8]; string(got) != string(want.Mem) {
		t.Fatal("the collector's memory differs from dtamem's public layout")
	}
	conn := benchConn()
	tp, _ := NewTranslator(conn, dtamem.Regions{Layout: dtamem.LayoutPublic, KeyWrite: &dtamem.KeyWriteRegion{Addr: 1 << 20, Slots: 1 << 16, DataWidth: 4}})
	r := dtawire.Report{Opcode: dtawire.OpKeyWrite, Redundancy: 2, Key: 9, Data: []byte{1, 2, 3, 4}}
	if a := testing.AllocsPerRun(200, func() { _ = tp.Translate(&r, func([]byte) error { return nil }) }); a != 0 {
		t.Fatalf("%v allocations per public-layout Key-Write", a)
	}
}
