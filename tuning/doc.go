// Package tuning is ByteTuning (Tan et al., "ByteTuning: Watermark Tuning for
// RoCEv2"): it searches the ECN (Kmin, Kmax, Pmax) and PFC (headroom,
// dynamic-threshold alpha) watermarks of a RoCEv2 fabric for the
// configuration that best trades throughput against queueing, using the
// paper's simulated annealing (Algorithm 1) on telemetry feedback.
//
// The pieces:
//
//   - Space: the watermarks to tune per switch layer (or per port), with
//     bounds and steps; the paper's 3300-point traversal space as a preset;
//     search-space compression (one watermark per layer, only switches on the
//     traffic's path, telemetry from the receiver side only).
//   - Optimizers: Algorithm 1 (Anneal) and the comparators grid search,
//     random search and an adaptive-step hill climb, all seeded and resumable
//     from a JSON state saved after every evaluation.
//   - Objective: Eq. 14 (throughput over its historic best and queue against
//     its historic best, weighted by beta), Eq. 15 (fairness, gamma),
//     aggregations Min/Max/Sum/P99, throughput from INT report counts
//     (Eq. 16), and a fixed normalisation for comparing methods.
//   - Targets: one small interface (apply a configuration, measure for a
//     while) with the fluid model of the paper's Section 4 (Eq. 6-13) as a
//     fast evaluator and real switches configured over SSH in five vendors'
//     dialects with rollback here, and the packet-level fabric simulator
//     running the paper's scenarios in bench/tunesim, which a run file
//     reaches through the Simulator interface.
//   - Baselines: the watermark presets of the paper's Tables 2 and 3.
//
// `appliance tune run` drives it; `appliance tune bench` and the lab's short
// run live with the simulator in bench/tunesim.
package tuning
