package hawkeyeanalyzer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rdma-appliance/appliance/internal/hawkeyewire"
)

// fields are the keys one object of the telemetry format has: those it
// must have (every field the writers always emit) and those it may, and
// the formats of the nested objects and lists of objects.
type fields struct {
	required, optional []string
	objects            map[string]*fields // key -> the object it holds
	lists              map[string]*fields // key -> the objects of the list it holds
	// oneOf: at least one of these keys must be there.
	oneOf []string
}

var (
	flowKeyFields = &fields{required: []string{"src", "dst", "sport", "dport", "proto"}}
	flowFields    = &fields{required: []string{"key", "in", "out", "packets", "qdepth_sum", "paused"},
		objects: map[string]*fields{"key": flowKeyFields}}
	telemetryFields = &fields{
		required: []string{"event", "victim", "time_ns", "hosts", "links", "reports"},
		objects:  map[string]*fields{"victim": flowKeyFields},
		lists: map[string]*fields{
			"links": {required: []string{"a", "a_port"}, optional: []string{"b", "b_port", "host"}, oneOf: []string{"b", "host"}},
			"reports": {required: []string{"switch", "epochs", "bytes"}, optional: []string{"evicted", "truncated", "packets"},
				lists: map[string]*fields{
					"evicted": flowFields,
					"epochs": {required: []string{"id", "start_ns", "ports", "flows", "meters"},
						lists: map[string]*fields{
							"ports":  {required: []string{"port", "packets", "paused", "qdepth_sum", "pause_frames", "paused_now", "pause_left_ns"}, optional: []string{"pause_sent"}},
							"flows":  flowFields,
							"meters": {required: []string{"in", "out", "bytes"}},
						}},
				}},
		},
	}
)

// check walks one decoded object against its format.
func (f *fields) check(v any, at string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: want an object", at)
	}
	for k := range obj {
		if !slices.Contains(f.required, k) && !slices.Contains(f.optional, k) {
			return fmt.Errorf("%s: unknown field %q", at, k)
		}
	}
	for _, k := range f.required {
		if _, ok := obj[k]; !ok {
			return fmt.Errorf("%s: missing field %q", at, k)
		}
	}
	if len(f.oneOf) > 0 && !slices.ContainsFunc(f.oneOf, func(k string) bool { _, ok := obj[k]; return ok }) {
		return fmt.Errorf("%s: needs one of %s", at, strings.Join(f.oneOf, ", "))
	}
	for k, sub := range f.objects {
		if x, ok := obj[k]; ok && x != nil {
			if err := sub.check(x, at+"."+k); err != nil {
				return err
			}
		}
	}
	for k, sub := range f.lists {
		list, ok := obj[k].([]any)
		if !ok {
			continue // absent, null, or not a list (the typed decoding says so)
		}
		for i, x := range list {
			if err := sub.check(x, fmt.Sprintf("%s.%s[%d]", at, k, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// DecodeStrict reads one incident's telemetry as JSON and rejects what
// Decode lets through: a field the format does not have, a field its
// writers always emit that is missing (a victim without a port, a flow
// record without its paused count), a link leading nowhere, anything
// after the object. The error says where. A diagnosis of a file that is
// not what it seems would only be a confident guess.
func DecodeStrict(r io.Reader) (*hawkeyewire.Telemetry, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("telemetry: data after the object")
	}
	if err := telemetryFields.check(raw, "telemetry"); err != nil {
		return nil, err
	}
	var t hawkeyewire.Telemetry
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	return &t, nil
}
