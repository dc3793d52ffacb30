// Package ibv is the libibverbs provider of the verbs API: on hosts with an
// RDMA NIC it serves the same API as the software RNIC through rdma-core. It
// is the only place in the module that links libibverbs, through cgo, and only
// in builds with the rdma tag; other builds get a stub whose calls say so.
package ibv

import "errors"

// ErrNotBuilt is returned by every call of a build without the rdma tag.
var ErrNotBuilt = errors.New("ibv: built without rdma support: rebuild with -tags rdma (needs libibverbs-dev)")
