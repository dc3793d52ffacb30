// Package verbstest is a conformance suite for providers of the verbs API.
// Run drives two devices through the public interfaces of package verbs only
// (devices, PDs, MRs, CQs, QPs, AHs), never a provider's internals, so the
// same suite checks the software RNIC (verbs/soft) and libibverbs
// (verbs/ibv) against one contract: randomized RC transfers of every work
// request type checked byte for byte, remote access violations, bad input,
// flushing, UD with address handles and Q_Keys, UC, and optional
// provider-specific fault hooks.
//
// It is an ordinary (non-test) package so that each provider's tests can
// call it, but it imports package testing and is meant to be imported only
// from _test.go files: nothing in the appliance's binaries links it.
//
// A provider wires it up in a test:
//
//	func TestConformance(t *testing.T) {
//		verbstest.Run(t, verbstest.Env{A: devA, B: devB, UC: true})
//	}
package verbstest

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/verbs"
)

// Env describes what a provider supplies to the suite.
type Env struct {
	// A and B are open devices. They may be the same device: on real
	// hardware two QPs of one RNIC talk through the NIC's loopback.
	A, B verbs.Device
	// PortA and PortB are the ports used on A and B (0 means 1).
	PortA, PortB int
	// GIDIndexA and GIDIndexB select each side's source GID. The GID of
	// each side, QueryPort(port).GIDs[index], is the DGID the other side
	// puts in its address vectors and address handles. Both must be of the
	// same IP version.
	GIDIndexA, GIDIndexB int

	// Alloc returns n bytes of zeroed memory to register (default
	// verbs.AllocBuffer(n, false): real NICs need memory outside the Go
	// heap). Free releases it once its region is deregistered (default
	// verbs.FreeBuffer when Alloc is the default, nothing otherwise).
	Alloc func(n int) ([]byte, error)
	Free  func(b []byte) error

	// Seed seeds the randomized tests; 0 means a fixed default, so every
	// run posts the same requests. A failing randomized test logs its seed.
	Seed uint64
	// Timeout bounds every wait for a completion (default 10 s); a wait
	// that runs out fails with what was still outstanding.
	Timeout time.Duration

	// SameClock says A and B stamp completions with one clock, so that a
	// UD send's completion timestamp is no later than that of the receive
	// it caused. True for soft devices (dpdk.Nanotime); two NICs have two
	// clocks, and even one NIC's loopback may write the receive completion
	// first.
	SameClock bool
	// UC says the provider implements UC QPs (soft does; RoCE NICs
	// generally do, but some providers refuse them).
	UC bool
	// PostChecksKeys says PostSend and PostRecv check every SGE's L_Key
	// and that the SGE lies inside its region, failing the post with
	// verbs.ErrBadKey (the soft RNIC, which resolves SGEs at post time).
	// Otherwise (hardware) the bad request is accepted and completes with
	// WCLocProtErr, moving the QP to ERR. The suite checks whichever the
	// provider declares.
	PostChecksKeys bool
	// PostToErrorQPFlushes says work requests posted to a QP in ERR are
	// accepted and completed with WCWRFlushErr, as the IBTA specifies and
	// mlx5 does. Otherwise (soft) such posts fail with verbs.ErrBadState.
	PostToErrorQPFlushes bool
	// AtomicReplyOrder is the byte order in which an atomic writes the
	// remote word's original value into the requester's buffer; nil means
	// the host's (soft, rxe). ConnectX on little-endian hosts replies
	// big-endian (IBV_ATOMIC_HCA_REPLY_BE). The remote word itself is
	// operated on in host order by all of them.
	AtomicReplyOrder binary.ByteOrder

	// Vanish, when set, makes device B disappear (close it, stop its
	// loop, unplug it) while A has requests outstanding towards it: they
	// must end in error completions, never hang. Run calls it in its last
	// sub-test; B is not used afterwards. Nil skips that sub-test; it must
	// be nil when A and B are one device.
	Vanish func()
}

// Run runs the conformance suite as sub-tests of t. Sub-tests whose
// capability flag or hook is off are skipped with a message.
//
//   - Device: device and port attributes.
//   - RC/Random/<MTU>: for each path MTU from 256 to 4096, seeded random
//     batches of SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM,
//     RDMA_READ and both atomics, 0 B to 1 MiB, in both directions, with
//     several SGEs, inline data, and signalled and unsignalled requests;
//     every completion field and both buffers are checked byte for byte.
//   - RC/SigAll, RC/InlineCopiedAtPost, RC/QueueRefill: SigAll QPs, inline
//     data copied at post, a completion freeing its queue slot at once.
//   - RC/RemoteAccess/...: bad R_Key, out of bounds, missing remote
//     permission on the region or the QP: WCRemAccessErr, then flushes.
//   - RC/PeerQPError: the responder QP fails mid-transfer: errors and
//     flushes, no hang. RC/ResetReuse: ERR -> RESET -> RTS again.
//   - BadInput/...: invalid transitions and attributes, posts in the wrong
//     state, bad L_Keys, oversize requests, full queues, with the error
//     values and the index of the refused request.
//   - FlushOnError: a QP moved to ERR flushes its posted receives.
//   - UD/Ping, UD/QKey: SEND and SEND_WITH_IMM through address handles,
//     the GRH area, completion timestamps, Q_Key violations dropped.
//   - UC: SENDs and WRITEs over UC (Env.UC).
//   - Vanish: device B disappears mid-transfer (Env.Vanish).
func Run(t *testing.T, env Env) {
	t.Helper()
	s := newSuite(t, env)
	t.Run("Device", s.testDevice)
	t.Run("RC", func(t *testing.T) {
		t.Run("Random", s.testRCRandom)
		t.Run("SigAll", s.testRCSigAll)
		t.Run("InlineCopiedAtPost", s.testRCInline)
		t.Run("QueueRefill", s.testRCQueueRefill)
		t.Run("RemoteAccess", s.testRCRemoteAccess)
		t.Run("PeerQPError", s.testRCPeerError)
		t.Run("ResetReuse", s.testRCResetReuse)
	})
	t.Run("BadInput", func(t *testing.T) {
		t.Run("Transitions", s.testTransitions)
		t.Run("PostState", s.testPostState)
		t.Run("LocalKey", s.testLocalKey)
		t.Run("Oversize", s.testOversize)
		t.Run("QueueFull", s.testQueueFull)
	})
	t.Run("FlushOnError", s.testFlushOnError)
	t.Run("UD", func(t *testing.T) {
		t.Run("Ping", s.testUDPing)
		t.Run("QKey", s.testUDQKey)
	})
	t.Run("UC", s.testUC)
	// Last: B is gone afterwards.
	t.Run("Vanish", s.testVanish)
}

// defaultSeed is the seed of runs that do not choose one.
const defaultSeed = 0x5eed_0f_7e57

// side is one device as the suite uses it.
type side struct {
	name string
	dev  verbs.Device
	info verbs.DeviceInfo
	port int
	gidx int
	gid  verbs.GID
	mtu  verbs.MTU // active MTU of the port
}

type suite struct {
	env     Env
	sides   [2]side
	mtu     verbs.MTU // the largest path MTU both ports carry
	seed    uint64
	timeout time.Duration
	alloc   func(int) ([]byte, error)
	free    func([]byte) error
	gone    bool // B vanished
}

func newSuite(t *testing.T, env Env) *suite {
	t.Helper()
	s := &suite{env: env, seed: env.Seed, timeout: env.Timeout, alloc: env.Alloc, free: env.Free}
	if s.seed == 0 {
		s.seed = defaultSeed
	}
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	if s.alloc == nil {
		s.alloc = func(n int) ([]byte, error) { return verbs.AllocBuffer(n, false) }
		if s.free == nil {
			s.free = verbs.FreeBuffer
		}
	}
	if env.A == nil || env.B == nil {
		t.Fatal("verbstest: Env needs devices A and B")
	}
	for i, d := range []verbs.Device{env.A, env.B} {
		sd := &s.sides[i]
		sd.name, sd.dev, sd.info = string(rune('A'+i)), d, d.Info()
		sd.port, sd.gidx = env.PortA, env.GIDIndexA
		if i == 1 {
			sd.port, sd.gidx = env.PortB, env.GIDIndexB
		}
		if sd.port == 0 {
			sd.port = 1
		}
		pa, err := d.QueryPort(sd.port)
		if err != nil {
			t.Fatalf("verbstest: device %s (%s): query port %d: %v", sd.name, sd.info.Name, sd.port, err)
		}
		if sd.gidx < 0 || sd.gidx >= len(pa.GIDs) {
			t.Fatalf("verbstest: device %s (%s) port %d: GID index %d, the table has %d entries", sd.name,
				sd.info.Name, sd.port, sd.gidx, len(pa.GIDs))
		}
		sd.gid, sd.mtu = pa.GIDs[sd.gidx], pa.ActiveMTU
		if sd.mtu.Bytes() == 0 {
			t.Fatalf("verbstest: device %s (%s) port %d: active MTU %v", sd.name, sd.info.Name, sd.port, pa.ActiveMTU)
		}
	}
	if s.sides[0].gid.IsIPv4() != s.sides[1].gid.IsIPv4() {
		t.Fatalf("verbstest: GIDs %v and %v are of different IP versions", s.sides[0].gid, s.sides[1].gid)
	}
	s.mtu = min(s.sides[0].mtu, s.sides[1].mtu)
	return s
}

// seedFor derives the seed of one randomized test, and logs it if the test
// fails so the run can be repeated with Env.Seed.
func (s *suite) seedFor(t *testing.T, salt uint64) uint64 {
	seed := s.seed ^ salt*0x9e3779b97f4a7c15
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("randomized with Env.Seed %#x (this test's stream %#x)", s.seed, seed)
		}
	})
	return seed
}

func (s *suite) testDevice(t *testing.T) {
	for i := range s.sides {
		sd := &s.sides[i]
		in := sd.info
		if in.Name == "" || in.Provider == "" {
			t.Errorf("device %s: info without name or provider: %+v", sd.name, in)
		}
		if in.Ports < sd.port {
			t.Errorf("device %s (%s): %d ports, the suite uses port %d", sd.name, in.Name, in.Ports, sd.port)
		}
		if in.MaxSGE < 1 || in.MaxQPWR < 1 || in.MaxCQE < 1 || in.MaxQP < 1 {
			t.Errorf("device %s (%s): limits %+v", sd.name, in.Name, in)
		}
		if in.CompletionTimestamps && in.ClockHz == 0 {
			t.Errorf("device %s (%s): completion timestamps without a clock rate", sd.name, in.Name)
		}
		pa, err := sd.dev.QueryPort(sd.port)
		if err != nil {
			t.Fatalf("device %s: %v", sd.name, err)
		}
		if pa.State != verbs.PortActive {
			t.Errorf("device %s (%s) port %d: state %v, want active", sd.name, in.Name, sd.port, pa.State)
		}
		if pa.ActiveMTU > pa.MaxMTU || pa.MaxMTU.Bytes() == 0 {
			t.Errorf("device %s (%s) port %d: active MTU %v, max %v", sd.name, in.Name, sd.port, pa.ActiveMTU, pa.MaxMTU)
		}
		t.Logf("%s: %s (%s) port %d GID[%d] %v, active MTU %v", sd.name, in.Name, in.Provider, sd.port, sd.gidx,
			sd.gid, pa.ActiveMTU)
	}
	if _, err := s.sides[0].dev.QueryPort(s.sides[0].info.Ports + 1); err == nil {
		t.Errorf("QueryPort(%d) of a %d-port device succeeded", s.sides[0].info.Ports+1, s.sides[0].info.Ports)
	}
}
