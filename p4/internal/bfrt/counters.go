package bfrt

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// PyEmit is the helper a counter script prints its records with: prefix,
// then the record as one line of JSON, so that ReadRecords can pick them
// out of whatever else bfshell prints.
func PyEmit(prefix string) string {
	return `
import json

def emit(rec):
    print('` + prefix + `' + json.dumps(rec, sort_keys=True))
`
}

// End closes a counter script with the record ReadRecords counts the
// others by: n records were printed before it.
func (s *Script) End(n int) {
	s.Blank()
	s.Line("emit({'kind': 'end', 'records': %d})", n)
}

// Head is what every record of a counter script has; record types embed
// it. The script closes with {"kind": "end", "records": n}, n counting
// the records before it.
type Head struct {
	Kind    string `json:"kind"` // counter, register, end, ...
	Records int    `json:"records"`
}

func (h *Head) head() *Head { return h }

// ReadRecords reads the output of a counter script run by bfshell: the
// lines holding prefix, from the prefix on, wherever it starts in the
// line; everything else is skipped. Each record is decoded strictly (an
// unknown field is an error) and handed to add with its line number,
// except the end record. It fails unless the end record is there, last,
// with the right count, so output cut short is never taken for zeros.
// Its errors wrap sentinel; add's are returned as they are.
func ReadRecords[R any, P interface {
	*R
	head() *Head
}](r io.Reader, prefix string, sentinel error, add func(ln int, rec P) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n, ln := 0, 0
	ended := false
	for sc.Scan() {
		ln++
		line := sc.Text()
		i := strings.Index(line, prefix)
		if i < 0 {
			continue
		}
		if ended {
			return fmt.Errorf("%w: line %d: a record after the end record", sentinel, ln)
		}
		rec := P(new(R))
		text := line[i+len(prefix):]
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(rec); err != nil {
			return fmt.Errorf("%w: line %d: %v", sentinel, ln, err)
		}
		// One record a line: what follows it (a second record run into
		// the first, a prompt) would otherwise be dropped unseen.
		if rest := strings.TrimSpace(text[dec.InputOffset():]); rest != "" {
			return fmt.Errorf("%w: line %d: %q after the record", sentinel, ln, trunc(rest, 40))
		}
		if h := rec.head(); h.Kind == "end" {
			if h.Records != n {
				return fmt.Errorf("%w: line %d: the script printed %d records, %d arrived", sentinel, ln, h.Records, n)
			}
			ended = true
			continue
		}
		n++
		if err := add(ln, rec); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %v", sentinel, err)
	}
	if !ended {
		if n == 0 {
			return fmt.Errorf("%w: no %q lines: did the script run?", sentinel, strings.TrimSpace(prefix))
		}
		return fmt.Errorf("%w: no end record after %d records: the output is cut short", sentinel, n)
	}
	return nil
}

// trunc cuts s to at most n bytes for an error message.
func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
