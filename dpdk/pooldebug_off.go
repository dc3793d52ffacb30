//go:build !pooldebug

package dpdk

// poolDebug is off: see pooldebug_on.go.
const poolDebug = false
