package hawkeyewire

import "testing"

// TestBaseRTT: a link's share is its delay twice and a 1086-byte frame
// out and a 64-byte ACK back, each with 20 bytes of preamble and gap
// (4095.2 ns at 2 us and 100 Gbit/s); six links, a fat-tree's longest
// path, 24571 ns; nothing without links or speed.
func TestBaseRTT(t *testing.T) {
	if h := HopRTT(2000, 100e9, 1086); h < 4095.19 || h > 4095.21 {
		t.Errorf("HopRTT %v ns, want 4095.2", h)
	}
	if b := BaseRTT(6, 2000, 100e9, 1086); b != 24571 {
		t.Errorf("BaseRTT over 6 links %d ns, want 24571", b)
	}
	if b := BaseRTT(2, 0, 400e9, 1086); b != 47 {
		t.Errorf("two links of no delay at 400G: %d ns, want 47", b)
	}
	for _, b := range []int64{BaseRTT(0, 2000, 100e9, 1086), BaseRTT(-1, 2000, 100e9, 1086), BaseRTT(6, 2000, 0, 1086)} {
		if b != 0 {
			t.Errorf("degenerate fabric: base %d, want 0", b)
		}
	}
}
