// Package dtatranslator is Direct Telemetry Access's translator in software:
// it takes the reports switches send (package dtawire) and turns each into
// RDMA WRITEs and FETCH_ADDs straight into a collector's memory (laid out as
// package dtamem defines), with a host-less RC requester (Conn: PSNs, ACK
// requests, ICRC, resynchronisation). Service adds what makes it a switch's
// translator: per-reporter sequence tracking with ACK/NACK, the RDMA rate
// meter with priorities, collector choice by key, and the exchange that
// sets up each collector connection. The reporter emulator sends reports as
// switches would.
package dtatranslator
