//go:build pooldebug

package dpdk

// poolDebug: built with -tags pooldebug, every buffer a pool takes back
// is filled with PoisonByte, and a buffer handed out again must still
// hold nothing else (see poison).
const poolDebug = true
