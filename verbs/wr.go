package verbs

import (
	"errors"
	"fmt"
)

// Errors returned by verbs calls, matched with errors.Is. They stand for the
// errno values ibverbs returns (EINVAL, ENOMEM, EPERM...).
var (
	ErrInvalidArgument = errors.New("verbs: invalid argument") // EINVAL
	ErrNoMemory        = errors.New("verbs: out of resources") // ENOMEM
	ErrBadState        = errors.New("verbs: invalid QP state") // EINVAL on a post to a QP in the wrong state
	ErrBadKey          = errors.New("verbs: invalid lkey")     // EINVAL / local protection
	ErrTooLarge        = errors.New("verbs: request exceeds limits")
	ErrQueueFull       = errors.New("verbs: work queue full") // ENOMEM from ibv_post_*
	ErrClosed          = errors.New("verbs: resource destroyed")
	ErrBusy            = errors.New("verbs: resource in use") // EBUSY
	ErrNotSupported    = errors.New("verbs: operation not supported")
)

// PostError says which work request of a post failed (ibv_post_send's
// bad_wr): requests before it were posted, it and those after were not.
type PostError struct {
	Index int
	Err   error
}

func (e *PostError) Error() string { return fmt.Sprintf("work request %d: %v", e.Index, e.Err) }
func (e *PostError) Unwrap() error { return e.Err }

// WROpcode is a send work request opcode, as IBV_WR_*.
type WROpcode uint8

// Send work request opcodes (values of enum ibv_wr_opcode).
const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
)

var wrNames = map[WROpcode]string{WRRDMAWrite: "RDMA_WRITE", WRRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM",
	WRSend: "SEND", WRSendWithImm: "SEND_WITH_IMM", WRRDMARead: "RDMA_READ",
	WRAtomicCmpAndSwp: "ATOMIC_CMP_AND_SWP", WRAtomicFetchAndAdd: "ATOMIC_FETCH_AND_ADD"}

func (o WROpcode) String() string {
	if s, ok := wrNames[o]; ok {
		return s
	}
	return fmt.Sprintf("wr_opcode(%d)", uint8(o))
}

// IsAtomic says whether the opcode is an 8-byte atomic.
func (o WROpcode) IsAtomic() bool { return o == WRAtomicCmpAndSwp || o == WRAtomicFetchAndAdd }

// HasImm says whether the opcode carries immediate data.
func (o WROpcode) HasImm() bool { return o == WRRDMAWriteWithImm || o == WRSendWithImm }

// SendFlags are IBV_SEND_* flags.
type SendFlags uint8

// Send flags.
const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// SGE is a scatter/gather element: Length bytes at Addr inside the region of
// LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request. SGL usually points into an array the caller
// keeps, so posting allocates nothing.
type SendWR struct {
	ID     uint64
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE
	Imm    uint32 // host order; carried big-endian on the wire

	// RDMA and atomics.
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64 // the add value of FETCH_ADD, the compare value of CMP_SWP
	Swap       uint64

	// UD.
	AH         AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// Len is the total length of the SGL.
func (wr *SendWR) Len() uint64 {
	var n uint64
	for _, s := range wr.SGL {
		n += uint64(s.Length)
	}
	return n
}

// RecvWR is a receive work request.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WCStatus is a work completion status, as enum ibv_wc_status.
type WCStatus uint8

// Work completion statuses.
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocEECOpErr    WCStatus = 3
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCMWBindErr      WCStatus = 6
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCLocRDDViolErr  WCStatus = 14
	WCRemInvRdReqErr WCStatus = 15
	WCRemAbortErr    WCStatus = 16
	WCInvEECNErr     WCStatus = 17
	WCInvEECStateErr WCStatus = 18
	WCFatalErr       WCStatus = 19
	WCRespTimeoutErr WCStatus = 20
	WCGeneralErr     WCStatus = 21
)

// The strings of ibv_wc_status_str.
var wcStatusNames = [...]string{"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error", "Work Request Flushed Error",
	"memory management operation error", "bad response error", "local access error",
	"remote invalid request error", "remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation error",
	"remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error"}

func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("unknown status (%d)", uint8(s))
}

// WCOpcode is a work completion opcode, as enum ibv_wc_opcode.
type WCOpcode uint8

// Work completion opcodes.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return fmt.Sprintf("wc_opcode(%d)", uint8(o))
}

// WCFlags are IBV_WC_* flags.
type WCFlags uint8

// Work completion flags.
const (
	WCWithGRH WCFlags = 1 << 0
	WCWithImm WCFlags = 1 << 1
)

// WC is a work completion.
type WC struct {
	ID      uint64
	Status  WCStatus
	Opcode  WCOpcode
	Flags   WCFlags
	ByteLen uint32
	Imm     uint32
	QPN     uint32 // the local QP
	SrcQP   uint32 // UD: the sender's QP
	// VendorErr carries the provider's detail (the soft RNIC's syndrome).
	VendorErr uint32
	// Timestamp is the completion time in nanoseconds of the device clock,
	// when the CQ was created with CompletionTimestamps.
	Timestamp int64
}

// CQAttr creates a completion queue.
type CQAttr struct {
	CQE int // minimum number of entries
	// CompletionTimestamps asks for WC.Timestamp (ibv_create_cq_ex with
	// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP).
	CompletionTimestamps bool
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(wcs) completions into wcs and returns how many.
	Poll(wcs []WC) (int, error)
	// Notify returns a channel that receives after a new completion is
	// queued, for consumers that do not busy-poll (like ibv_req_notify_cq
	// with a completion channel). It never blocks the provider.
	Notify() <-chan struct{}
	Destroy() error
}
