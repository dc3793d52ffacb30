package dtacollector

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Query is one question to a collector's HTTP API (Register): its path,
// and Answer, a new value of the answer's type to decode into.
type Query struct {
	Path   string
	Answer any
}

// QueryOptions are the queries' settings: Consensus is how many Key-Write
// slots must agree (0: the collector's default), Recent how many of a
// list's latest entries to return (0: the list's setting).
type QueryOptions struct {
	Consensus, Recent int
}

// QueryWhat are the queries ParseQuery knows.
const QueryWhat = "keywrite, keyincrement, sketch, postcard, list, stats, regions or connections"

// ParseQuery reads a query as `appliance dta query` takes it, WHAT and
// its arguments:
//
//	keywrite KEY, keyincrement KEY, sketch ID count KEY, sketch ID cardinality,
//	postcard KEY [HOP...], list ID, stats, regions, connections
//
// A postcard query with hops checks the record against that path.
//
// Keys are checked here (ParseKey), so a bad key never reaches the
// collector.
func ParseQuery(args []string, o QueryOptions) (Query, error) {
	if len(args) == 0 {
		return Query{}, errors.New("what to query? " + QueryWhat)
	}
	switch args[0] {
	case "postcard":
		if len(args) > 2 {
			return postcardQuery(args)
		}
		return keyQuery(args, o)
	case "keywrite", "keyincrement":
		return keyQuery(args, o)
	case "sketch":
		return sketchQuery(args)
	case "list":
		if err := wantArgs(args, 2, "list ID"); err != nil {
			return Query{}, err
		}
		p := "/v1/lists/" + url.PathEscape(args[1])
		if o.Recent > 0 {
			p += "?recent=" + strconv.Itoa(o.Recent)
		}
		return Query{p, new(ListStatus)}, nil
	case "stats":
		return fixedQuery(args, "/v1/stats", new(Stats))
	case "regions":
		return fixedQuery(args, "/v1/regions", new(RegionsInfo))
	case "connections":
		return fixedQuery(args, "/v1/connections", new([]ConnState))
	}
	return Query{}, fmt.Errorf("unknown query %q: want %s", args[0], QueryWhat)
}

// keyQuery is keywrite, keyincrement or postcard KEY.
func keyQuery(args []string, o QueryOptions) (Query, error) {
	if err := wantArgs(args, 2, args[0]+" KEY"); err != nil {
		return Query{}, err
	}
	k, err := pathKey(args[1])
	if err != nil {
		return Query{}, err
	}
	switch args[0] {
	case "keywrite":
		p := "/v1/keywrite/" + k
		if o.Consensus > 0 {
			p += "?consensus=" + strconv.Itoa(o.Consensus)
		}
		return Query{p, new(KeyWriteResult)}, nil
	case "keyincrement":
		return Query{"/v1/keyincrement/" + k, new(KeyIncrementResult)}, nil
	}
	return Query{"/v1/postcards/" + k, new(PostcardResult)}, nil
}

// postcardQuery is postcard KEY HOP...: the record checked against the
// path.
func postcardQuery(args []string) (Query, error) {
	k, err := pathKey(args[1])
	if err != nil {
		return Query{}, err
	}
	hops := strings.Join(args[2:], ",")
	if _, err := ParsePath(hops); err != nil {
		return Query{}, err
	}
	return Query{"/v1/postcards/" + k + "?expect=" + url.QueryEscape(hops), new(PostcardResult)}, nil
}

// sketchQuery is sketch ID count KEY or sketch ID cardinality.
func sketchQuery(args []string) (Query, error) {
	if len(args) < 3 {
		return Query{}, errors.New("want sketch ID count KEY or sketch ID cardinality")
	}
	id := url.PathEscape(args[1])
	switch args[2] {
	case "count":
		if err := wantArgs(args, 4, "sketch ID count KEY"); err != nil {
			return Query{}, err
		}
		k, err := pathKey(args[3])
		if err != nil {
			return Query{}, err
		}
		return Query{"/v1/sketches/" + id + "/count/" + k, new(SketchCountResult)}, nil
	case "cardinality":
		if err := wantArgs(args, 3, "sketch ID cardinality"); err != nil {
			return Query{}, err
		}
		return Query{"/v1/sketches/" + id + "/cardinality", new(CardinalityResult)}, nil
	}
	return Query{}, fmt.Errorf("sketch %s %s: want count KEY or cardinality", args[1], args[2])
}

// fixedQuery is a query without arguments.
func fixedQuery(args []string, path string, answer any) (Query, error) {
	if err := wantArgs(args, 1, args[0]); err != nil {
		return Query{}, err
	}
	return Query{path, answer}, nil
}

func wantArgs(args []string, n int, usage string) error {
	if len(args) != n {
		return errors.New("want " + usage)
	}
	return nil
}

// pathKey checks a key and escapes it for a path.
func pathKey(s string) (string, error) {
	if _, err := ParseKey(s); err != nil {
		return "", err
	}
	return url.PathEscape(s), nil
}
