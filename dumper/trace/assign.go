package trace

import (
	"fmt"

	"github.com/rdma-appliance/appliance/internal/mirror"
)

// ScheduleAssign returns an Options.Assign for copies spread over dumpers
// by the injector's per-packet weighted round-robin (mirror.WRR, which the
// software injector and the Tofino program's slot table both follow): over
// each cycle of sum(weights) sequence numbers, dumper i gets weights[i],
// and firstSeq (1 for inject.Injector) took the first slot. Numbers below
// firstSeq are assigned "". names[i] is the Source.Name of dumper i.
//
// The schedule only holds while the injector sent every copy it numbered:
// a copy it lost for want of a buffer takes no slot and shifts the rest.
func ScheduleAssign(names []string, weights []int, firstSeq uint64) (func(seq uint64) string, error) {
	if len(names) != len(weights) {
		return nil, fmt.Errorf("trace: %d dumper names for %d weights", len(names), len(weights))
	}
	w, err := mirror.NewWRR(weights)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, x := range weights {
		total += x
	}
	slots := make([]string, total)
	for i := range slots {
		slots[i] = names[w.Next()]
	}
	return func(seq uint64) string {
		if seq < firstSeq {
			return ""
		}
		return slots[(seq-firstSeq)%uint64(len(slots))]
	}, nil
}
