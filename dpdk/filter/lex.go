package filter

import (
	"fmt"
	"net/netip"
	"strings"
)

// SyntaxError is a filter that does not compile: Pos is the byte offset in
// the expression where the problem was found.
type SyntaxError struct {
	Expr string
	Pos  int
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("filter: %s at column %d: %q", e.Msg, e.Pos+1, e.Expr)
}

// Caret renders the expression with a caret under the position, for a
// terminal.
func (e *SyntaxError) Caret() string {
	return e.Expr + "\n" + strings.Repeat(" ", min(e.Pos, len(e.Expr))) + "^ " + e.Msg
}

type tokKind uint8

const (
	tEOF tokKind = iota
	tWord
	tOp
)

type token struct {
	kind tokKind
	text string
	pos  int
}

func isWordStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isWordByte(c byte) bool { return isWordStart(c) || c == '.' || c == '-' || c == ':' }

// lex splits an expression into words (keywords, numbers, addresses,
// names such as tcp-syn) and operators. A run of word bytes with colons
// is an address when it parses as a MAC or IPv6 address and is cut at the
// first colon otherwise, so ip[2:2] lexes as ip [ 2 : 2 ].
func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case isWordStart(c) || c == ':' && i+1 < len(s) && s[i+1] == ':' || c == '\\':
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			w := s[i:j]
			if strings.Contains(w, ":") && !isColonAddr(w) {
				j = i + strings.IndexByte(w, ':')
				if j == i {
					return nil, &SyntaxError{Expr: s, Pos: i, Msg: "bad address"}
				}
				w = s[i:j]
			}
			// A word ends with a letter, digit or dot, as libpcap's does:
			// "1-" is 1 then minus.
			for len(w) > 1 && w[len(w)-1] == '-' {
				w = w[:len(w)-1]
				j--
			}
			toks = append(toks, token{tWord, w, i})
			i = j
		default:
			op := ""
			for _, o := range []string{"&&", "||", "<<", ">>", "<=", ">=", "!=", "==",
				"(", ")", "[", "]", ":", "+", "-", "*", "/", "%", "&", "|", "^", "!", "=", "<", ">"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, &SyntaxError{Expr: s, Pos: i, Msg: fmt.Sprintf("unexpected character %q", c)}
			}
			toks = append(toks, token{tOp, op, i})
			i += len(op)
		}
	}
	return append(toks, token{tEOF, "", len(s)}), nil
}

func isColonAddr(w string) bool {
	if _, ok := parseMAC(w); ok {
		return true
	}
	a, err := netip.ParseAddr(w)
	return err == nil && a.Is6()
}

// parseMAC reads xx:xx:xx:xx:xx:xx (also with dashes) and xxxx.xxxx.xxxx.
func parseMAC(w string) ([6]byte, bool) {
	var m [6]byte
	hex := func(s string) (uint64, bool) {
		if s == "" || len(s) > 4 {
			return 0, false
		}
		var v uint64
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c >= '0' && c <= '9':
				v = v<<4 | uint64(c-'0')
			case c >= 'a' && c <= 'f':
				v = v<<4 | uint64(c-'a'+10)
			case c >= 'A' && c <= 'F':
				v = v<<4 | uint64(c-'A'+10)
			default:
				return 0, false
			}
		}
		return v, true
	}
	for _, sep := range []string{":", "-"} {
		parts := strings.Split(w, sep)
		if len(parts) != 6 {
			continue
		}
		ok := true
		for i, p := range parts {
			v, good := hex(p)
			if !good || len(p) > 2 {
				ok = false
				break
			}
			m[i] = byte(v)
		}
		if ok {
			return m, true
		}
	}
	if parts := strings.Split(w, "."); len(parts) == 3 {
		for i, p := range parts {
			v, good := hex(p)
			if !good || len(p) != 4 {
				return m, false
			}
			m[2*i], m[2*i+1] = byte(v>>8), byte(v)
		}
		return m, true
	}
	return m, false
}
