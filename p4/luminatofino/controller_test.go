package luminatofino

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
	"github.com/rdma-appliance/appliance/internal/service"
	"github.com/rdma-appliance/appliance/p4/internal/p4test"
	"github.com/rdma-appliance/appliance/translator/inject"
)

// TestController drives the Tofino control plane through the software
// injector's API with a stand-in bfshell: the load runs the Listing 2
// setup script, the stats run the counter script and read its output.
func TestController(t *testing.T) {
	spec, err := inject.LoadSpec(filepath.Join("testdata", "listing2_injector.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var scripts []string
	c := &Controller{Spec: spec, Bfshell: func(_ context.Context, script string) ([]byte, error) {
		scripts = append(scripts, script)
		if strings.Contains(script, CounterPrefix) {
			return []byte(bfshellOutput), nil
		}
		return []byte("bfrt> exit\n"), nil
	}}
	s := service.New("tofino", "127.0.0.1:0", nil)
	c.Register(s)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	cl := service.NewClient(srv.URL)
	ctx := context.Background()
	var st mirror.InjectorStats
	if err := cl.Do(ctx, "GET", "/v1/stats", nil, &st); err != nil || st.RxRoCE != 0 {
		t.Fatalf("stats before a load: %v %+v", err, st)
	}
	data, _ := os.ReadFile(filepath.Join("testdata", "listing2_load.json"))
	var req inject.LoadRequest
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(ctx, "POST", "/v1/load", req, nil); err != nil {
		t.Fatal(err)
	}
	p4test.Golden(t, "listing2.py", scripts[0])
	if err := cl.Do(ctx, "GET", "/v1/stats", nil, &st); err != nil || st.RxRoCE != 150 || st.Mirrored != 150 {
		t.Fatalf("stats: %v %+v", err, st)
	}
	var es []inject.EntryHits
	if err := cl.Do(ctx, "GET", "/v1/entries", nil, &es); err != nil || len(es) != 3 {
		t.Fatalf("entries: %v %d", err, len(es))
	}
	// A test the program cannot hold is refused with the reason; a
	// failing bfshell is named as such.
	bad := req
	bad.Intents = append(bad.Intents, intent.Intent{QP: 9, PSN: 1, Iter: 1, Type: mirror.EventDrop})
	if err := cl.Do(ctx, "POST", "/v1/load", bad, nil); err == nil || !strings.Contains(err.Error(), "422") {
		t.Fatalf("bad test: %v", err)
	}
	c.Bfshell = func(context.Context, string) ([]byte, error) { return nil, errors.New("no switchd") }
	if err := cl.Do(ctx, "POST", "/v1/load", req, nil); err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "bfshell") {
		t.Fatalf("bfshell failing: %v", err)
	}
}
