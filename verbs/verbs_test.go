package verbs

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

func TestRCStateMachine(t *testing.T) {
	a := &QPAttr{State: QPSInit, PKeyIndex: 0, Port: 1, AccessFlags: AccessLocalWrite | AccessRemoteWrite}
	s, err := CheckModify(QPTypeRC, QPSReset, a, AttrState|AttrPKeyIndex|AttrPort|AttrAccessFlags)
	if err != nil || s != QPSInit {
		t.Fatalf("RESET->INIT: %v %v", s, err)
	}
	a = &QPAttr{State: QPSRTR, PathMTU: MTU1024, DestQPN: 0x12, RQPSN: 100, MaxDestRdAtomic: 4, MinRNRTimer: 12,
		AH: AHAttr{DGID: GIDFromAddr(netip.MustParseAddr("10.0.0.2"))}}
	rtr := AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer
	if s, err = CheckModify(QPTypeRC, QPSInit, a, rtr); err != nil || s != QPSRTR {
		t.Fatalf("INIT->RTR: %v %v", s, err)
	}
	_, err = CheckModify(QPTypeRC, QPSInit, a, rtr&^AttrMinRNRTimer)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "needs MIN_RNR_TIMER") {
		t.Fatalf("missing attribute: %v", err)
	}
	_, err = CheckModify(QPTypeRC, QPSInit, a, rtr|AttrSQPSN)
	if err == nil || !strings.Contains(err.Error(), "does not take SQ_PSN") {
		t.Fatalf("extra attribute: %v", err)
	}
	a = &QPAttr{State: QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 200, MaxRdAtomic: 4}
	rts := AttrState | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic
	if s, err = CheckModify(QPTypeRC, QPSRTR, a, rts); err != nil || s != QPSRTS {
		t.Fatalf("RTR->RTS: %v %v", s, err)
	}
	a.RetryCnt = 8
	if _, err = CheckModify(QPTypeRC, QPSRTR, a, rts); err == nil || !strings.Contains(err.Error(), "retry_cnt 8") {
		t.Fatalf("retry_cnt 8: %v", err)
	}
	// Skipping a state is not a transition.
	if _, err = CheckModify(QPTypeRC, QPSReset, &QPAttr{State: QPSRTS}, AttrState); err == nil {
		t.Fatal("RESET->RTS accepted")
	}
	// No attributes is an error, not a nil dereference (providers call
	// CheckModify before touching attr).
	if s, err := CheckModify(QPTypeRC, QPSInit, nil, AttrState); !errors.Is(err, ErrInvalidArgument) || s != QPSInit {
		t.Fatalf("nil attributes: %v %v", s, err)
	}
	// Any state may go to ERR and RESET with nothing else.
	for cur := QPSReset; cur <= QPSErr; cur++ {
		if s, err := CheckModify(QPTypeRC, cur, &QPAttr{State: QPSErr}, AttrState); err != nil || s != QPSErr {
			t.Fatalf("%v->ERR: %v", cur, err)
		}
	}
	if s, err := CheckModify(QPTypeRC, QPSRTS, &QPAttr{State: QPSSQD}, AttrState); err != nil || s != QPSSQD {
		t.Fatalf("RTS->SQD: %v", err)
	}
}

func TestUDStateMachine(t *testing.T) {
	if _, err := CheckModify(QPTypeUD, QPSReset, &QPAttr{State: QPSInit, Port: 1, QKey: 0x11111111},
		AttrState|AttrPKeyIndex|AttrPort|AttrQKey); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckModify(QPTypeUD, QPSInit, &QPAttr{State: QPSRTR}, AttrState); err != nil {
		t.Fatalf("UD INIT->RTR needs nothing: %v", err)
	}
	if _, err := CheckModify(QPTypeUD, QPSInit, &QPAttr{State: QPSRTR, PathMTU: MTU1024}, AttrState|AttrPathMTU); err == nil {
		t.Fatal("UD takes no path MTU at RTR")
	}
	if _, err := CheckModify(QPTypeUD, QPSRTR, &QPAttr{State: QPSRTS, SQPSN: 1}, AttrState|AttrSQPSN); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckModify(QPType(9), QPSReset, &QPAttr{}, AttrState); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("unknown type: %v", err)
	}
}

func TestAccessAndUnits(t *testing.T) {
	if err := (AccessRemoteWrite).Validate(); err == nil {
		t.Fatal("remote write without local write accepted")
	}
	if err := (AccessLocalWrite | AccessRemoteAtomic | AccessRemoteRead).Validate(); err != nil {
		t.Fatal(err)
	}
	if MTU4096.Bytes() != 4096 || MTU256.Bytes() != 256 || MTU(0).Bytes() != 0 || MTUFromBytes(1024) != MTU1024 {
		t.Fatal("MTU enum")
	}
	if TimeoutNanos(14) != 67108864 || TimeoutNanos(0) != 0 {
		t.Fatalf("timeout 14 = %d ns, want 67.1 ms", TimeoutNanos(14))
	}
	if RNRTimerNanos(0) != 655360000 || RNRTimerNanos(1) != 10000 || RNRTimerNanos(31) != 491520000 {
		t.Fatal("RNR timer table")
	}
	if WCRetryExcErr.String() != "transport retry counter exceeded" || WCWRFlushErr.String() != "Work Request Flushed Error" {
		t.Fatal("status strings differ from ibv_wc_status_str")
	}
	if (AttrState | AttrDestQPN).String() != "STATE|DEST_QPN" {
		t.Fatal((AttrState | AttrDestQPN).String())
	}
}

type fakeProvider struct{ fail bool }

func (p fakeProvider) Name() string { return "fake" }
func (p fakeProvider) Devices() ([]DeviceInfo, error) {
	if p.fail {
		return nil, errors.New("ENOSYS")
	}
	return []DeviceInfo{{Name: "fake0", Provider: "fake"}}, nil
}
func (p fakeProvider) Open(name string) (Device, error) { return nil, ErrNotSupported }

// registerFake registers the fake provider once per test binary, so the
// test also passes under -count=N.
var registerFake sync.Once

func TestRegistry(t *testing.T) {
	registerFake.Do(func() { Register(fakeProvider{}) })
	devs, err := DeviceList()
	if err != nil || len(devs) != 1 || devs[0].Name != "fake0" {
		t.Fatalf("DeviceList: %v %v", devs, err)
	}
	if _, err := OpenDevice("fake0"); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("open fake0 reached the provider: %v", err)
	}
	if _, err := OpenDevice("fake:x"); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("explicit provider: %v", err)
	}
	if _, err := OpenDevice("nope0"); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("missing device: %v", err)
	}
}

func TestAllocBuffer(t *testing.T) {
	b, err := AllocBuffer(10000, true)
	if err != nil {
		t.Fatal(err)
	}
	b[9999] = 1
	if err := FreeBuffer(b); err != nil {
		t.Fatal(err)
	}
	if _, err := AllocBuffer(0, false); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("size 0: %v", err)
	}
}
