package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client calls another service's control API; orchestrators use it to drive
// remote dumpers, injectors and collectors.
type Client struct {
	Base string // "http://host:port"
	HTTP *http.Client
	// Token, when set, is sent as a bearer token (NewClient takes the
	// process's, see SetDefaultToken).
	Token []byte
}

// NewClient returns a client for addr ("host:port" or a URL).
func NewClient(addr string) *Client {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	c := &Client{Base: strings.TrimRight(addr, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
	if t := defaultToken.Load(); t != nil {
		c.Token = *t
	}
	return c
}

// NewRequest is a request to the service at path with the client's token,
// for callers that stream the answer themselves (a dumper's files).
func (c *Client) NewRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	return req, nil
}

// authorize adds the token to a request.
func (c *Client) authorize(req *http.Request) {
	if c.Token != nil {
		req.Header.Set("Authorization", "Bearer "+string(c.Token))
	}
}

// Do sends a JSON request (in may be nil) and decodes a JSON answer into out
// (may be nil). Error answers come back as errors carrying the service's text.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return err
	}
	if in != nil || (method != http.MethodGet && method != http.MethodHead) {
		// Services take changes only as JSON, with a body or not.
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, c.Base+path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return fmt.Errorf("%s %s: reading answer: %w", method, c.Base+path, err)
	}
	if resp.StatusCode >= 300 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			return fmt.Errorf("%s %s: %s: %s", method, c.Base+path, resp.Status, eb.Error)
		}
		return fmt.Errorf("%s %s: %s", method, c.Base+path, resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding answer: %w", method, c.Base+path, err)
		}
	}
	return nil
}

// Get fetches path and returns the status and body whatever the status:
// a failing /healthz answers 503 with the document that names the failing
// components, which Do would turn into a bare error.
func (c *Client) Get(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	c.authorize(req)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	return resp.StatusCode, b, err
}
