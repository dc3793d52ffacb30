// Package report draws the appliance's charts and writes its reports as
// single self-contained HTML files: Lumina test runs, the lab summary and
// the later experiments (Hawkeye, ByteTuning, Hostmesh).
//
// A report has to survive being mailed, attached to a ticket or opened
// years later from an archived run directory, on a machine without
// network access. So a Page is one file with inline CSS, charts as inline
// SVG, images as data: URIs, and no JavaScript; and the package needs
// nothing beyond the Go standard library, so that any binary of the
// appliance can write one.
//
// A Chart renders the same layout to SVG (text, scalable, for pages) and
// to PNG (for chat, tickets and slides), the PNG rasterised here with a
// built-in bitmap font instead of a font and graphics dependency. Bad data
// is expected — empty runs, a single sample, NaN counters, ranges over
// many decades — and is drawn as well as it can be rather than panicking.
//
// Screenshot and NotBlank check the HTML the way a reader sees it, in a
// headless Chromium when one is installed.
package report
