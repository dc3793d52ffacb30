//go:build !race

package lumina_test

const raceDetector = false
