// Package inject is Lumina's event injector in software: the middlebox
// between the two RDMA hosts of a test that drops, ECN-marks or corrupts
// chosen data packets deterministically, mirrors every RoCE packet (before
// the event takes effect) with metadata to a pool of dumpers, and forwards
// the rest.
//
// A Table holds the entries that intent.Compile made from a test's intents,
// together with the per-connection ITER trackers, and matches packets; the
// Injector runs the pipeline on dpdk ports and writes each copy's metadata
// as package mirror defines it; the HTTP control and the YAML Spec make it a
// service.
package inject
