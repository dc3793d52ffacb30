package luminaanalyzer

// Metadata the analyzers would use if the orchestrator recorded it (not
// in Meta yet: proposed here, to be added to meta.go by its owner):
//
//   - NICConfig.CNPScope ("per-port", "per-dest-ip", "per-ip-pair",
//     "per-qp", or "" when unknown) and NICConfig.NAKTriggersCNP (*bool):
//     what the test expects of the notification point. The CNP analyzer
//     infers both from the trace (CNPReport.Consistent, NAKTriggersCNP);
//     with them it could state pass or fail instead of only what it found.
//   - Meta.IterMode ("paper" or "p4"): how the injector counted rounds, so
//     that the timeout analyzer could tell how many transmissions of each
//     message the intents were meant to drop (an iter-7 drop under the
//     paper's rule hits fewer messages than under the P4 one).
//   - Meta.CaptureStartNs / CaptureStopNs: when the dumpers started and
//     stopped. A trace that ends with a PSN lost and unanswered is taken as
//     a give-up; the stop time would tell a give-up from a capture that
//     ended before the requester's next timeout.
