package luminatofino

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/p4/internal/p4test"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// TestFromSpec: the injector file and load request of Listing 2 give the
// same script as the Program written out in listing2().
func TestFromSpec(t *testing.T) {
	s, err := inject.LoadSpec(filepath.Join("testdata", "listing2_injector.yml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "listing2_load.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req inject.LoadRequest
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatal(err)
	}
	p, err := FromSpec(s, req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Script()
	if err != nil {
		t.Fatal(err)
	}
	p4test.Golden(t, "listing2.py", got)

	s.Balance = "flow-hash"
	if _, err := FromSpec(s, req); err == nil || !strings.Contains(err.Error(), "round-robin") {
		t.Fatalf("flow-hash on a Tofino: %v", err)
	}
	s.Balance = ""
	req.Intents = append(req.Intents, intent.Intent{QP: 9, PSN: 1, Iter: 1, Type: mirror.EventDrop})
	if _, err := FromSpec(s, req); err == nil {
		t.Fatal("an intent on a connection that does not exist compiled")
	}
}
