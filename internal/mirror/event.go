package mirror

import (
	"fmt"
	"strings"
)

// EventType is the event injected into a packet, numbered as Lumina numbers
// them (and as the mirrored copy carries it in its TTL).
type EventType uint8

// Event types.
const (
	EventNone     EventType = 0
	EventDrop     EventType = 1
	EventECN      EventType = 2
	EventBitError EventType = 3
)

var eventNames = [...]string{"none", "drop", "ecn", "bit-error"}

func (e EventType) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("event(%d)", uint8(e))
}

// ParseEventType parses Lumina's names: drop, ecn, bit-error (and none).
func ParseEventType(s string) (EventType, error) {
	for i, n := range eventNames {
		if strings.EqualFold(s, n) {
			return EventType(i), nil
		}
	}
	return 0, fmt.Errorf("mirror: unknown event type %q (drop, ecn, bit-error)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (e EventType) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (e *EventType) UnmarshalText(b []byte) error {
	t, err := ParseEventType(string(b))
	*e = t
	return err
}
