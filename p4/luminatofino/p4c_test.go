package luminatofino

import (
	"testing"

	"github.com/rdma-appliance/appliance/p4/internal/p4test"
)

// TestP4FrontEnd runs p4c's front end on injector.p4; it takes about a
// second. make test runs the same check for every program through
// p4/check.sh.
func TestP4FrontEnd(t *testing.T) { p4test.FrontEnd(t, p4Path) }
