package report

import "flag"

// keep names a directory where tests leave what they render (sample
// page, its screenshot, edge-case charts) for a person to look at:
//
//	go test ./internal/report -run 'Sample|Edge' -keep /tmp/report
var keep = flag.String("keep", "", "directory to keep rendered samples in")
