package pcap

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Convert rewrites the trace in as out with opts (another format, snap
// length or compression) and returns the packets written; the end of ctx
// stops it, with what was written so far kept.
func Convert(ctx context.Context, in, out string, opts WriterOptions) (int64, error) {
	r, err := Open(in)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var w *Writer
	var n int64
	var rec Record
	for {
		if n%65536 == 0 && ctx.Err() != nil {
			break
		}
		err := r.Next(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if w != nil {
				w.Close()
			}
			return n, fmt.Errorf("%s: %w", in, err)
		}
		if w == nil { // the first record says the link type (pcapng has no file-wide one)
			opts.LinkType = rec.LinkType
			if w, err = Create(out, opts); err != nil {
				return 0, err
			}
		}
		if err := w.WritePacket(rec.Timestamp, rec.Data, rec.OrigLen); err != nil {
			w.Close()
			return n, fmt.Errorf("%s: %w", out, err)
		}
		n++
	}
	if w == nil { // an empty trace still converts to an empty file
		opts.LinkType = r.LinkType()
		var err error
		if w, err = Create(out, opts); err != nil {
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return n, err
	}
	return n, ctx.Err()
}
