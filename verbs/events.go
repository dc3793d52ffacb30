package verbs

import "fmt"

// AsyncEventType is an asynchronous event type, numbered as enum
// ibv_event_type.
type AsyncEventType int

// Asynchronous event types.
const (
	EventCQErr            AsyncEventType = 0
	EventQPFatal          AsyncEventType = 1
	EventQPReqErr         AsyncEventType = 2
	EventQPAccessErr      AsyncEventType = 3
	EventCommEst          AsyncEventType = 4
	EventSQDrained        AsyncEventType = 5
	EventPathMig          AsyncEventType = 6
	EventPathMigErr       AsyncEventType = 7
	EventDeviceFatal      AsyncEventType = 8
	EventPortActive       AsyncEventType = 9
	EventPortErr          AsyncEventType = 10
	EventLIDChange        AsyncEventType = 11
	EventPKeyChange       AsyncEventType = 12
	EventSMChange         AsyncEventType = 13
	EventSRQErr           AsyncEventType = 14
	EventSRQLimitReached  AsyncEventType = 15
	EventQPLastWQEReached AsyncEventType = 16
	EventClientReregister AsyncEventType = 17
	EventGIDChange        AsyncEventType = 18
	EventWQFatal          AsyncEventType = 19
)

var eventNames = [...]string{"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
	"local access violation work queue error", "communication established", "send queue drained", "path migrated",
	"path migration request error", "local catastrophic error", "port active", "port error", "LID change",
	"P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached", "last WQE reached",
	"client reregistration", "GID table change", "WQ fatal"}

// String is ibv_event_type_str's text.
func (t AsyncEventType) String() string {
	if t >= 0 && int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("unknown event (%d)", int(t))
}

// AsyncEvent is an asynchronous event (ibv_async_event): the element it is
// about is QPN for QP events, CQ for CQ events, Port for port events.
type AsyncEvent struct {
	Type AsyncEventType
	QPN  uint32
	CQ   CQ
	Port int
}

func (e AsyncEvent) String() string {
	switch e.Type {
	case EventCQErr:
		return e.Type.String()
	case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange, EventClientReregister,
		EventGIDChange, EventDeviceFatal:
		return fmt.Sprintf("%v on port %d", e.Type, e.Port)
	}
	return fmt.Sprintf("%v on QP %#x", e.Type, e.QPN)
}

// EventSource is implemented by devices that report asynchronous events,
// as ibv_get_async_event does. The channel is closed when the device is.
// Events the reader is too slow to take are dropped and counted by the
// provider rather than stalling the device.
type EventSource interface {
	AsyncEvents() <-chan AsyncEvent
}
