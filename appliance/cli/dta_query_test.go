package cli

import (
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/collector/dtacollector"
	"github.com/rdma-appliance/appliance/internal/dtamem"
)

// TestShowPostcard: an incomplete record says which hops it lacks, a
// checked one that it was checked.
func TestShowPostcard(t *testing.T) {
	for _, tc := range []struct {
		r    dtacollector.PostcardResult
		says string
	}{
		{dtacollector.PostcardResult{Key: 7, Path: dtamem.Path{Mask: 0xb, Hops: []uint32{10, 11, 0, 13, 0}}, Reported: 3, Missing: []int{2, 4}},
			"flow 7: 10 11 - 13 - (incomplete: 3 of 5 hops, missing hop 2, 4: written before they reported)"},
		{dtacollector.PostcardResult{Key: 8, Path: dtamem.Path{Mask: 3, Hops: []uint32{1, 2}}, Complete: true, Reported: 2, Expected: []uint32{1, 2}},
			"flow 8: 1 2 (complete; every reported hop as expected)"},
	} {
		var b strings.Builder
		showAnswer(&b, &tc.r)
		if got := strings.TrimSpace(b.String()); got != tc.says {
			t.Errorf("got %q, want %q", got, tc.says)
		}
	}
}
