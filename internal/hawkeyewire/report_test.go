package hawkeyewire

import "testing"

// TestPacking: records fill packets up to the MTU, a packet never holds
// more than MTU - 36 bytes of records, the epoch record is repeated in a
// packet an epoch spills into, and a packet budget truncates.
func TestPacking(t *testing.T) {
	k := NewPacker(576, 0)
	k.Epoch()
	for range 40 { // 12 + 40 x 34 = 1372 bytes: 540 a packet
		k.Add(FlowRecordLen)
	}
	k.Flush()
	// 15 flows a packet after the epoch record (12 + 15 x 34 = 522),
	// then 15 each with the repeated epoch record, then 10.
	if k.Packets() != 3 || k.Bytes() != 3*ReportOverhead+3*EpochRecordLen+40*FlowRecordLen {
		t.Fatalf("%d packets, %d bytes", k.Packets(), k.Bytes())
	}
	k = Packer{Room: 540, Max: 2}
	k.Epoch()
	n := 0
	for range 40 {
		if k.Add(FlowRecordLen) {
			n++
		}
	}
	if !k.Truncated() || n != 30 || k.Packets() != 2 {
		t.Fatalf("budget: %d records in %d packets, truncated %v", n, k.Packets(), k.Truncated())
	}
}
