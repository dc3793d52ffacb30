package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Long evaluations (hawkeye eval, mesh eval) run in shards, one per array
// job of a batch system; each shard's results are a JSON file, and a merge
// command adds them up.

// parseShard reads --shard i/n; without it the run is the whole, 0/1.
func parseShard(s string) (i, n int, err error) {
	if s == "" {
		return 0, 1, nil
	}
	if _, err := fmt.Sscanf(s, "%d/%d", &i, &n); err != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, Usagef("--shard %q: want i/n with 0 <= i < n", s)
	}
	return i, n, nil
}

// writeShard writes shard i of n's results to DIR/NAME-shard-i-of-n.json
// and returns the path.
func writeShard(dir, name string, i, n int, v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	return writeOut(dir, fmt.Sprintf("%s-shard-%d-of-%d.json", name, i, n), b)
}

// writeOut writes DIR/NAME, making DIR, and returns the path.
func writeOut(dir, name string, b []byte) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, b, 0o644)
}

// readShards reads the shard files a merge command was given.
func readShards[T any](files []string) ([][]T, error) {
	if len(files) == 0 {
		return nil, Usagef("want the shards' files")
	}
	var parts [][]T
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var part []T
		if err := json.Unmarshal(b, &part); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		parts = append(parts, part)
	}
	return parts, nil
}
