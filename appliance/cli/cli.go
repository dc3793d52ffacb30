// Package cli is the appliance command line: one file per subcommand, each a
// Command value with its flags in an options struct and a runX function that
// calls the library package the command drives, with --help everywhere,
// shared logging flags and a context that ends on SIGTERM or SIGINT so
// services stop gracefully.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/rdma-appliance/appliance/internal/service"
)

// Command is a subcommand, possibly with subcommands of its own.
type Command struct {
	Name    string
	Summary string // one line for the command list
	Usage   string // argument synopsis, e.g. "[flags] FILE"
	Long    string // paragraphs printed by --help
	// Flags declares the command's flags on fs and returns the function that
	// runs the command with the remaining arguments.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error
	Sub   []*Command
}

// Env is what a command runs with.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Log    *slog.Logger
}

// UsageError is returned for bad arguments; the CLI prints the command's usage
// and exits with status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef makes a UsageError.
func Usagef(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// commands are the top-level commands, each a value in the file of its
// name; a group lists its subcommands in its own file.
var commands = []*Command{captureCmd, doctorCmd, dtaCmd, dumpCmd, hawkeyeCmd, injectCmd, labCmd, luminaCmd, meshCmd, pcapCmd, portsCmd,
	setupCmd, simCmd, statusCmd, tuneCmd, verbsCmd, versionCmd}

// bind is the usual end of a command's Flags: the flags fill *o, the
// arguments land in *args, and run gets the options.
func bind[O any](o *O, args *[]string, run func(context.Context, *Env, O) error) func(context.Context, *Env, []string) error {
	return func(ctx context.Context, env *Env, a []string) error {
		*args = a
		return run(ctx, env, *o)
	}
}

// Run runs the command line and returns the process exit status.
func Run(args []string) int {
	return run(context.Background(), args, os.Stdout, os.Stderr)
}

func run(parent context.Context, args []string, stdout, stderr io.Writer) int {
	root := flag.NewFlagSet("appliance", flag.ContinueOnError)
	root.SetOutput(stderr)
	level := root.String("log-level", "info", "log level: debug, info, warn, error")
	format := root.String("log-format", "text", "log format: text or json")
	tokenFile := root.String("token-file", os.Getenv("APPLIANCE_TOKEN_FILE"),
		"bearer token for control endpoints: services off loopback take changes only with it, clients send it (default $APPLIANCE_TOKEN_FILE)")
	root.Usage = func() {} // printed below, once, as for every command
	if err := root.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printRootUsage(stdout, root)
			return 0
		}
		printRootUsage(stderr, root)
		return 2
	}
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		fmt.Fprintln(stderr, "appliance:", err)
		return 2
	}
	slog.SetDefault(log)
	// One token per process: every service it runs requires it and every
	// client it makes sends it.
	var tok []byte
	if *tokenFile != "" {
		if tok, err = service.ReadToken(*tokenFile); err != nil {
			fmt.Fprintln(stderr, "appliance: --token-file:", err)
			return 2
		}
	}
	service.SetDefaultToken(tok)
	rest := root.Args()
	if len(rest) == 0 {
		printRootUsage(stderr, root)
		return 2
	}
	if rest[0] == "help" {
		if len(rest) == 1 {
			printRootUsage(stdout, root)
			return 0
		}
		rest = append(rest[1:], "--help")
	}
	ctx, stop := signal.NotifyContext(parent, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	env := &Env{Stdout: stdout, Stderr: stderr, Log: log}
	return dispatch(ctx, env, commands, "appliance", rest)
}

func find(cmds []*Command, name string) *Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func dispatch(ctx context.Context, env *Env, cmds []*Command, path string, args []string) int {
	c := find(cmds, args[0])
	if c == nil {
		fmt.Fprintf(env.Stderr, "%s: unknown command %q; run '%s --help'\n", path, args[0], path)
		return 2
	}
	path += " " + c.Name
	args = args[1:]
	if len(c.Sub) > 0 && c.Flags == nil {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			printGroupUsage(env.Stdout, path, c)
			if len(args) == 0 {
				return 2
			}
			return 0
		}
		return dispatch(ctx, env, c.Sub, path, args)
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	runFn := c.Flags(fs)
	// The usage is printed here, once: to stdout for --help (as the tools
	// users know do, so `--help | less` works), to stderr after the flag
	// package's error. Printed from fs.Usage too, --help went to both.
	fs.Usage = func() {}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(env.Stdout, path, c, fs)
			return 0
		}
		printCommandUsage(env.Stderr, path, c, fs)
		return 2
	}
	if err := runFn(ctx, env, pos); err != nil {
		var ue *UsageError
		if errors.As(err, &ue) {
			fmt.Fprintf(env.Stderr, "%s: %s\n", path, ue.Msg)
			printCommandUsage(env.Stderr, path, c, fs)
			return 2
		}
		fmt.Fprintf(env.Stderr, "%s: %v\n", path, err)
		return 1
	}
	return 0
}

// parseInterspersed parses flags anywhere on the command line, as the
// tools users know do (`pcap info f.pcap --json` takes --json as a flag,
// not as a file): parsing resumes after each argument that is not a flag.
// "--" ends the flags; what follows is arguments, even when it starts
// with a dash.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func printRootUsage(w io.Writer, root *flag.FlagSet) {
	fmt.Fprintf(w, `appliance: a dataplane appliance for RDMA (RoCEv2) datacenter networks.
It injects events into RDMA traffic and checks NICs (Lumina), collects telemetry
straight into RDMA memory (DTA), diagnoses PFC anomalies (Hawkeye), tunes ECN/PFC
watermarks (ByteTuning) and probes RNIC meshes (Hostmesh).

Usage: appliance [global flags] COMMAND [flags] [args]

Commands:
`)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	sorted := append([]*Command(nil), commands...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, c := range sorted {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nGlobal flags:\n")
	root.SetOutput(w)
	root.PrintDefaults()
	fmt.Fprintf(w, "\nRun 'appliance COMMAND --help' for a command's flags.\n")
}

func printGroupUsage(w io.Writer, path string, c *Command) {
	fmt.Fprintf(w, "%s: %s\n\nUsage: %s COMMAND [flags] [args]\n\nCommands:\n", path, c.Summary, path)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, s := range c.Sub {
		fmt.Fprintf(tw, "  %s\t%s\n", s.Name, s.Summary)
	}
	tw.Flush()
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Long))
	}
}

func printCommandUsage(w io.Writer, path string, c *Command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "%s: %s\n\nUsage: %s %s\n", path, c.Summary, path, c.Usage)
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Long))
	}
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if has {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// writeJSON prints v as indented JSON, as every --json does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
