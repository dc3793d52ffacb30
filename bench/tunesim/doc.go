// Package tunesim runs ByteTuning (package tuning) against the fabric
// simulator: the paper's scenarios as a tuning.Target, the Simulator that
// serves run files' simulator target kind, the benchmark that measures the
// whole grid and compares annealing with its rivals on the same budget
// (`appliance tune bench`), and the lab's short run.
package tunesim
