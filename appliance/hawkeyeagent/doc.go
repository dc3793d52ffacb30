// Package hawkeyeagent is Hawkeye's host agent on a real host: it watches
// RTT samples per 5-tuple and sends a polling packet (package hawkeyewire)
// towards the first-hop switch when a flow's RTT passes a threshold of its
// base RTT.
package hawkeyeagent
