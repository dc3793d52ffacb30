// Package spec loads YAML configuration strictly into pure-data Spec structs
// and reports every problem as file:line: key: message, so an operator can go
// straight to the line to fix. Unknown keys, duplicate keys and values of the
// wrong type are errors, and a Spec's own validation points at the offending
// key through the Doc it was decoded from.
package spec

import (
	"encoding"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is one configuration problem.
type Error struct {
	File   string
	Line   int
	Column int
	Key    string // dotted path, e.g. "traffic.data-pkt-events[1].psn"
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is a list of problems found in one file; it is returned as a single
// error whose text has one problem per line.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the individual problems.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Doc is a decoded YAML document that still knows where every key was, so
// validation can report positions.
type Doc struct {
	File string
	root *yaml.Node
	errs Errors
	more int // problems past MaxErrors, counted, not listed
}

// MaxErrors bounds the problems listed for one file. A file that repeats a
// block thousands of times (or a fuzzer's input) would otherwise cost time
// and memory quadratic in its size to report; the first problems are the
// ones an operator fixes first, and the rest are counted.
const MaxErrors = 50

// add records a problem, or counts it once MaxErrors are listed.
func (d *Doc) add(errs *Errors, e *Error) {
	if len(*errs) >= MaxErrors {
		d.more++
		return
	}
	*errs = append(*errs, e)
}

// listed closes a list of problems with the count of those not listed.
func (d *Doc) listed(errs Errors) Errors {
	if d.more > 0 {
		errs = append(errs, &Error{File: d.File, Msg: fmt.Sprintf("%d more problems not listed", d.more)})
	}
	return errs
}

// LoadFile reads path and decodes it strictly into v (a pointer to a struct).
func LoadFile(path string, v any) (*Doc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Decode(path, data, v)
}

// Decode decodes data strictly into v; name is used in errors.
func Decode(name string, data []byte, v any) (*Doc, error) {
	d := &Doc{File: name}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, d.yamlError(err)
	}
	d.root = &root
	if root.Kind == 0 { // empty document
		return d, nil
	}
	body := &root
	if body.Kind == yaml.DocumentNode && len(body.Content) > 0 {
		body = body.Content[0]
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil, fmt.Errorf("spec: Decode needs a non-nil pointer, got %T", v)
	}
	var errs Errors
	c := checker{d: d, errs: &errs, seen: map[checked]bool{}}
	c.check(body, rv.Type().Elem(), "")
	if len(errs) > 0 {
		return nil, d.listed(errs)
	}
	if err := body.Decode(v); err != nil {
		return nil, d.yamlError(err)
	}
	return d, nil
}

var lineRE = regexp.MustCompile(`line (\d+): (.*)`)

// yamlError turns yaml.v3's messages ("yaml: line 3: ...", or a TypeError with
// several "line N: ..." entries) into positioned Errors.
func (d *Doc) yamlError(err error) error {
	var te *yaml.TypeError
	var msgs []string
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var errs Errors
	for _, m := range msgs {
		e := &Error{File: d.File, Msg: m}
		if sm := lineRE.FindStringSubmatch(m); sm != nil {
			e.Line, _ = strconv.Atoi(sm[1])
			e.Msg = sm[2]
			e.Key = d.keyAtLine(e.Line)
		}
		d.add(&errs, e)
	}
	return d.listed(errs)
}

var (
	unmarshalerType     = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checker walks the YAML tree against the Go type and records keys the type
// does not have and keys a mapping repeats. Types that decode themselves are
// trusted with their subtree.
type checker struct {
	d    *Doc
	errs *Errors
	// seen holds the anchored nodes already checked against a type: a
	// document of nested aliases ("billion laughs") expands exponentially,
	// and checking one anchor once per type finds every problem it has.
	seen map[checked]bool
}

type checked struct {
	n *yaml.Node
	t reflect.Type
}

func (c *checker) check(n *yaml.Node, t reflect.Type, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Anchor != "" {
		if c.seen[checked{n, t}] {
			return
		}
		c.seen[checked{n, t}] = true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // yaml.v3 reports the type mismatch with its line
		}
		c.unique(n, path)
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // merge key: check the merged mapping instead
				c.check(val, t, path)
				continue
			}
			f, ok := fields[k.Value]
			if !ok {
				c.d.add(c.errs, &Error{File: c.d.File, Line: k.Line, Column: k.Column, Key: join(path, k.Value),
					Msg: "unknown key" + suggest(k.Value, fields)})
				continue
			}
			c.check(val, f, join(path, k.Value))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		c.unique(n, path)
		for i := 0; i+1 < len(n.Content); i += 2 {
			c.check(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, e := range n.Content {
			c.check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// unique reports each repeated key of a mapping against its first
// definition. yaml.v3 checks this too, but compares every pair of keys and
// reports every pair, which is quadratic in the keys of one mapping.
func (c *checker) unique(n *yaml.Node, path string) {
	if len(n.Content) < 4 {
		return
	}
	first := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.Value == "<<" {
			continue
		}
		if f, ok := first[k.Value]; ok {
			c.d.add(c.errs, &Error{File: c.d.File, Line: k.Line, Column: k.Column, Key: join(path, k.Value),
				Msg: fmt.Sprintf("mapping key %q already defined at line %d", k.Value, f.Line)})
			continue
		}
		first[k.Value] = k
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps the YAML names of a struct's fields to their types,
// following inline embedded structs.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					out[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// suggest names the closest known key when the unknown one is a likely typo.
func suggest(key string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	for k := range fields {
		if d := editDistance(key, k); d < bestD || (d == bestD && best != "" && k < best) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Node finds the node of a dotted key path ("a.b[2].c"), or nil.
func (d *Doc) Node(path string) (key, value *yaml.Node) {
	if d == nil || d.root == nil {
		return nil, nil
	}
	n := d.root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if path == "" {
		return nil, n
	}
	for _, part := range splitPath(path) {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		if idx, err := strconv.Atoi(part); err == nil && n.Kind == yaml.SequenceNode {
			if idx < 0 || idx >= len(n.Content) {
				return nil, nil
			}
			key, n = nil, n.Content[idx]
			continue
		}
		if n.Kind != yaml.MappingNode {
			return nil, nil
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				key, n, found = n.Content[i], n.Content[i+1], true
				break
			}
		}
		if !found {
			return nil, nil
		}
	}
	return key, n
}

func splitPath(path string) []string {
	path = strings.ReplaceAll(path, "[", ".")
	path = strings.ReplaceAll(path, "]", "")
	return strings.Split(path, ".")
}

// Line is the line of the key at path (or of its value for list items); for a
// key that is absent it is the line of the nearest present parent, so a
// "missing key" error still points into the right block. 0 when unknown.
func (d *Doc) Line(path string) int {
	for p := path; ; {
		k, v := d.Node(p)
		switch {
		case k != nil:
			return k.Line
		case v != nil:
			return v.Line
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return 0
		}
		p = p[:i]
	}
}

// Errorf records a validation problem at the key path. Validation collects
// every problem and returns them together with Err.
func (d *Doc) Errorf(path, format string, args ...any) {
	if len(d.errs) >= MaxErrors {
		d.more++
		return
	}
	d.errs = append(d.errs, &Error{File: d.File, Line: d.Line(path), Key: path, Msg: fmt.Sprintf(format, args...)})
}

// Err returns the recorded validation problems, or nil.
func (d *Doc) Err() error {
	if d == nil || len(d.errs) == 0 {
		return nil
	}
	return d.listed(d.errs)
}

// keyAtLine returns the dotted path of the first key on a line, for errors
// that yaml.v3 reports by line only.
func (d *Doc) keyAtLine(line int) string {
	if d.root == nil {
		return ""
	}
	var found string
	var walk func(n *yaml.Node, path string) bool
	walk = func(n *yaml.Node, path string) bool {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if walk(c, path) {
					return true
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := join(path, n.Content[i].Value)
				if n.Content[i].Line == line {
					found = p
					return true
				}
				if walk(n.Content[i+1], p) {
					return true
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if c.Line == line && c.Kind == yaml.ScalarNode {
					found = p
					return true
				}
				if walk(c, p) {
					return true
				}
			}
		}
		return false
	}
	walk(d.root, "")
	return found
}

// Validator is a Spec that checks itself, recording every problem in the
// Doc it was decoded from (so each names its line) and filling defaults.
type Validator interface {
	Validate(doc *Doc)
}

// LoadValid reads path strictly into v and validates it: the one call a
// Spec's LoadSpec needs. The error lists every problem with its file,
// line and key.
func LoadValid(path string, v Validator) error {
	doc, err := LoadFile(path, v)
	if err != nil {
		return err
	}
	v.Validate(doc)
	return doc.Err()
}

// DecodeValid is LoadValid for YAML held in memory; name is used in
// errors.
func DecodeValid(name string, data []byte, v Validator) error {
	doc, err := Decode(name, data, v)
	if err != nil {
		return err
	}
	v.Validate(doc)
	return doc.Err()
}

// Validated is a spec type whose pointer decodes and validates itself.
type Validated[T any] interface {
	*T
	Validator
}

// LoadAs is LoadValid into a new T, returned only when valid: a package's
// LoadSpec is LoadAs[Spec](path).
func LoadAs[T any, P Validated[T]](path string) (T, error) {
	var s T
	if err := LoadValid(path, P(&s)); err != nil {
		var zero T
		return zero, err
	}
	return s, nil
}

// DecodeAs is LoadAs for YAML held in memory; name is used in errors.
func DecodeAs[T any, P Validated[T]](name string, data []byte) (T, error) {
	var s T
	if err := DecodeValid(name, data, P(&s)); err != nil {
		var zero T
		return zero, err
	}
	return s, nil
}

// CheckRefusal says what is wrong with err as a loader's refusal of file:
// nil when it is Errors, each naming file, as every loader's must be (the
// fuzz targets of the packages' spec files check theirs with it).
func CheckRefusal(err error, file string) error {
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 {
		return fmt.Errorf("not spec.Errors: %v", err)
	}
	for _, e := range es {
		if e.File != file {
			return fmt.Errorf("names %q, not %q: %v", e.File, file, e)
		}
	}
	return nil
}
