package verbs

import "fmt"

// QPType is a queue pair transport type, as enum ibv_qp_type.
type QPType uint8

// QP types.
const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
)

func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	}
	return fmt.Sprintf("qp_type(%d)", uint8(t))
}

// QPState is a queue pair state, as enum ibv_qp_state.
type QPState uint8

// QP states.
const (
	QPSReset QPState = 0
	QPSInit  QPState = 1
	QPSRTR   QPState = 2
	QPSRTS   QPState = 3
	QPSSQD   QPState = 4
	QPSSQE   QPState = 5
	QPSErr   QPState = 6
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("qp_state(%d)", uint8(s))
}

// QPCap are a QP's queue sizes.
type QPCap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// QPInitAttr creates a queue pair.
type QPInitAttr struct {
	Type   QPType
	SendCQ CQ
	RecvCQ CQ
	Cap    QPCap
	// SigAll makes every send signalled, whatever its flags.
	SigAll bool
}

// AttrMask says which QPAttr fields a Modify sets, as enum ibv_qp_attr_mask.
type AttrMask uint32

// Attribute mask bits.
const (
	AttrState            AttrMask = 1 << 0
	AttrCurState         AttrMask = 1 << 1
	AttrEnSQDAsyncNotify AttrMask = 1 << 2
	AttrAccessFlags      AttrMask = 1 << 3
	AttrPKeyIndex        AttrMask = 1 << 4
	AttrPort             AttrMask = 1 << 5
	AttrQKey             AttrMask = 1 << 6
	AttrAV               AttrMask = 1 << 7
	AttrPathMTU          AttrMask = 1 << 8
	AttrTimeout          AttrMask = 1 << 9
	AttrRetryCnt         AttrMask = 1 << 10
	AttrRNRRetry         AttrMask = 1 << 11
	AttrRQPSN            AttrMask = 1 << 12
	AttrMaxQPRdAtomic    AttrMask = 1 << 13
	AttrAltPath          AttrMask = 1 << 14
	AttrMinRNRTimer      AttrMask = 1 << 15
	AttrSQPSN            AttrMask = 1 << 16
	AttrMaxDestRdAtomic  AttrMask = 1 << 17
	AttrPathMigState     AttrMask = 1 << 18
	AttrCap              AttrMask = 1 << 19
	AttrDestQPN          AttrMask = 1 << 20
)

var attrNames = [...]string{"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX", "PORT",
	"QKEY", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC", "ALT_PATH",
	"MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN"}

func (m AttrMask) String() string {
	s := ""
	for i, n := range attrNames {
		if m&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	if s == "" {
		return "0"
	}
	return s
}

// QPAttr are queue pair attributes (struct ibv_qp_attr, RoCE subset).
type QPAttr struct {
	State           QPState
	CurState        QPState
	PathMTU         MTU
	QKey            uint32
	RQPSN           uint32
	SQPSN           uint32
	DestQPN         uint32
	AccessFlags     Access
	AH              AHAttr // the primary path (AV)
	PKeyIndex       uint16
	MaxRdAtomic     uint8 // outstanding RDMA READ/atomic as requester
	MaxDestRdAtomic uint8 // responder resources
	MinRNRTimer     uint8 // 5-bit encoded RNR NAK timer
	Port            uint8
	Timeout         uint8 // local ACK timeout: 4.096 us x 2^Timeout, 0 = infinite
	RetryCnt        uint8
	RNRRetry        uint8 // 7 = infinite
	// EnSQDAsyncNotify asks for an EventSQDrained when a move to SQD
	// finishes draining the send queue.
	EnSQDAsyncNotify bool
	// SQDraining is set by Query while the QP is in SQD with requests
	// still outstanding (ibv_qp_attr.sq_draining).
	SQDraining bool
	Cap        QPCap
}

// QP is a queue pair.
type QP interface {
	QPN() uint32
	Type() QPType
	// Modify changes attributes selected by mask, validating the transition
	// as ibv_modify_qp does.
	Modify(attr *QPAttr, mask AttrMask) error
	// Query returns the current attributes.
	Query() (QPAttr, error)
	// PostSend posts work requests; on failure a *PostError says which one.
	PostSend(wrs []SendWR) error
	// PostRecv posts receive requests; on failure a *PostError says which.
	PostRecv(wrs []RecvWR) error
	Destroy() error
}

// transition rules of the IBTA spec (the table Linux checks in
// ib_modify_qp_is_ok), for RoCE's RC, UC and UD.
type transRule struct {
	valid    bool
	req, opt [5]AttrMask // indexed by QP type (2: RC, 3: UC, 4: UD)
}

func rule(req, opt map[QPType]AttrMask) transRule {
	r := transRule{valid: true}
	for t, m := range req {
		r.req[t] = m
	}
	for t, m := range opt {
		r.opt[t] = m
	}
	return r
}

var qpTransitions = func() (tab [7][7]transRule) {
	all := func(m AttrMask) map[QPType]AttrMask {
		return map[QPType]AttrMask{QPTypeRC: m, QPTypeUC: m, QPTypeUD: m}
	}
	for cur := QPSReset; cur <= QPSErr; cur++ {
		tab[cur][QPSReset] = transRule{valid: true}
		tab[cur][QPSErr] = transRule{valid: true}
	}
	tab[QPSReset][QPSInit] = rule(map[QPType]AttrMask{
		QPTypeUD: AttrPKeyIndex | AttrPort | AttrQKey,
		QPTypeUC: AttrPKeyIndex | AttrPort | AttrAccessFlags,
		QPTypeRC: AttrPKeyIndex | AttrPort | AttrAccessFlags,
	}, nil)
	tab[QPSInit][QPSInit] = rule(nil, map[QPType]AttrMask{
		QPTypeUD: AttrPKeyIndex | AttrPort | AttrQKey,
		QPTypeUC: AttrPKeyIndex | AttrPort | AttrAccessFlags,
		QPTypeRC: AttrPKeyIndex | AttrPort | AttrAccessFlags,
	})
	tab[QPSInit][QPSRTR] = rule(map[QPType]AttrMask{
		QPTypeUC: AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN,
		QPTypeRC: AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer,
	}, map[QPType]AttrMask{
		QPTypeUD: AttrPKeyIndex | AttrQKey,
		QPTypeUC: AttrAltPath | AttrAccessFlags | AttrPKeyIndex,
		QPTypeRC: AttrAltPath | AttrAccessFlags | AttrPKeyIndex,
	})
	tab[QPSRTR][QPSRTS] = rule(map[QPType]AttrMask{
		QPTypeUD: AttrSQPSN,
		QPTypeUC: AttrSQPSN,
		QPTypeRC: AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic,
	}, map[QPType]AttrMask{
		QPTypeUD: AttrCurState | AttrQKey,
		QPTypeUC: AttrCurState | AttrAltPath | AttrAccessFlags | AttrPathMigState,
		QPTypeRC: AttrCurState | AttrAltPath | AttrAccessFlags | AttrMinRNRTimer | AttrPathMigState,
	})
	tab[QPSRTS][QPSRTS] = rule(nil, map[QPType]AttrMask{
		QPTypeUD: AttrCurState | AttrQKey,
		QPTypeUC: AttrCurState | AttrAccessFlags | AttrAltPath | AttrPathMigState,
		QPTypeRC: AttrCurState | AttrAccessFlags | AttrAltPath | AttrPathMigState | AttrMinRNRTimer,
	})
	tab[QPSRTS][QPSSQD] = rule(nil, all(AttrEnSQDAsyncNotify))
	tab[QPSSQD][QPSRTS] = rule(nil, map[QPType]AttrMask{
		QPTypeUD: AttrCurState | AttrQKey,
		QPTypeUC: AttrCurState | AttrAltPath | AttrAccessFlags | AttrPathMigState,
		QPTypeRC: AttrCurState | AttrAltPath | AttrAccessFlags | AttrMinRNRTimer | AttrPathMigState,
	})
	tab[QPSSQD][QPSSQD] = rule(nil, map[QPType]AttrMask{
		QPTypeUD: AttrPKeyIndex | AttrQKey,
		QPTypeUC: AttrAV | AttrAltPath | AttrAccessFlags | AttrPKeyIndex | AttrPathMigState,
		QPTypeRC: AttrPort | AttrAV | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic |
			AttrMaxDestRdAtomic | AttrAltPath | AttrAccessFlags | AttrPKeyIndex | AttrMinRNRTimer | AttrPathMigState,
	})
	tab[QPSSQE][QPSRTS] = rule(nil, map[QPType]AttrMask{
		QPTypeUD: AttrCurState | AttrQKey,
		QPTypeUC: AttrCurState | AttrAccessFlags,
	})
	return tab
}()

// CheckModify validates a Modify the way ibv_modify_qp does: the transition
// must exist for the QP type, every required attribute must be in the mask and
// nothing outside required+optional; the values must be in range. It returns
// the target state. Providers call it before applying attributes.
func CheckModify(t QPType, cur QPState, attr *QPAttr, mask AttrMask) (QPState, error) {
	if t != QPTypeRC && t != QPTypeUC && t != QPTypeUD {
		return cur, fmt.Errorf("%w: QP type %v", ErrNotSupported, t)
	}
	if attr == nil {
		return cur, fmt.Errorf("%w: nil attributes", ErrInvalidArgument)
	}
	next := cur
	if mask&AttrState != 0 {
		next = attr.State
	}
	if mask&AttrCurState != 0 && attr.CurState != cur {
		if !(attr.CurState == QPSSQE && cur == QPSRTS) && !(attr.CurState == QPSRTS && cur == QPSSQE) {
			return cur, fmt.Errorf("%w: cur_state %v but the QP is %v", ErrInvalidArgument, attr.CurState, cur)
		}
	}
	if cur > QPSErr || next > QPSErr {
		return cur, fmt.Errorf("%w: state %v -> %v", ErrInvalidArgument, cur, next)
	}
	r := qpTransitions[cur][next]
	if !r.valid {
		return cur, fmt.Errorf("%w: %v QP cannot go from %v to %v", ErrInvalidArgument, t, cur, next)
	}
	// Moving to RESET or ERR needs nothing and ignores everything else.
	if next == QPSReset || next == QPSErr {
		return next, nil
	}
	req, opt := r.req[t], r.opt[t]
	given := mask &^ AttrState
	if miss := req &^ given; miss != 0 {
		return cur, fmt.Errorf("%w: %v %v -> %v needs %v", ErrInvalidArgument, t, cur, next, miss)
	}
	if extra := given &^ (req | opt); extra != 0 {
		return cur, fmt.Errorf("%w: %v %v -> %v does not take %v", ErrInvalidArgument, t, cur, next, extra)
	}
	if err := checkValues(attr, mask); err != nil {
		return cur, err
	}
	return next, nil
}

func checkValues(a *QPAttr, mask AttrMask) error {
	bad := func(name string, v any) error {
		return fmt.Errorf("%w: %s %v out of range", ErrInvalidArgument, name, v)
	}
	switch {
	case mask&AttrPathMTU != 0 && a.PathMTU.Bytes() == 0:
		return bad("path_mtu", a.PathMTU)
	case mask&AttrTimeout != 0 && a.Timeout > 31:
		return bad("timeout", a.Timeout)
	case mask&AttrRetryCnt != 0 && a.RetryCnt > 7:
		return bad("retry_cnt", a.RetryCnt)
	case mask&AttrRNRRetry != 0 && a.RNRRetry > 7:
		return bad("rnr_retry", a.RNRRetry)
	case mask&AttrMinRNRTimer != 0 && a.MinRNRTimer > 31:
		return bad("min_rnr_timer", a.MinRNRTimer)
	case mask&AttrRQPSN != 0 && a.RQPSN > 0xffffff:
		return bad("rq_psn", a.RQPSN)
	case mask&AttrSQPSN != 0 && a.SQPSN > 0xffffff:
		return bad("sq_psn", a.SQPSN)
	case mask&AttrDestQPN != 0 && a.DestQPN > 0xffffff:
		return bad("dest_qp_num", a.DestQPN)
	case mask&AttrAV != 0 && a.AH.FlowLabel > 0xfffff:
		return bad("flow_label", a.AH.FlowLabel)
	case mask&AttrPort != 0 && a.Port == 0:
		return bad("port_num", a.Port)
	}
	if mask&AttrAccessFlags != 0 {
		if err := a.AccessFlags.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// TimeoutNanos is the local ACK timeout of the encoded value t:
// 4.096 us x 2^t, 0 meaning infinite (returned as 0).
func TimeoutNanos(t uint8) int64 {
	if t == 0 {
		return 0
	}
	return 4096 << t
}

// RNRTimerNanos decodes the 5-bit RNR NAK timer of the IBTA table (0 means
// 655.36 ms).
func RNRTimerNanos(t uint8) int64 {
	return rnrTimerUS[t&31] * 1000
}

var rnrTimerUS = [32]int64{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520}
