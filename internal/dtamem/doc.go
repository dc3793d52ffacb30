// Package dtamem is the contract between a DTA translator and the collector
// memory it writes with RDMA, owned by neither side: the regions a collector
// advertises (Key-Write slots, Key-Increment counters, Append rings,
// Sketch-Merge sketches, the Postcarder flow table) and their geometry, the
// slot hashing both sides compute, the Append entry format, the readers a
// collector queries its memory with, and the exchange over TCP that hands a
// translator the regions and a QP.
//
// The translator (translator/dtatranslator, p4/dtatofino) writes what this
// package lays out; the collector (collector/dtacollector) reads it back with
// the same code, so the two cannot drift apart.
package dtamem
