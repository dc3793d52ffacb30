// Package hawkeyeagent is Hawkeye's host agent on a real host: it watches
// RTT samples per 5-tuple and sends a polling packet (package hawkeyewire)
// towards the first-hop switch when a flow's RTT passes a threshold of its
// base RTT, with the PFC bit while the host's NIC is paused by its switch
// (PFCMonitor, from the NIC's PFC counters).
package hawkeyeagent
