// Package commands is the `shipfile` command line: its commands (spf13/cobra), their
// flags and outputs, and the exit codes (0 done, 1 failed, 2 usage).
package commands

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/config"
	"github.com/shipfile/shipfile/cli/internal/crypt"
	"github.com/shipfile/shipfile/cli/internal/printable"
	"github.com/shipfile/shipfile/cli/internal/progress"
	"github.com/shipfile/shipfile/cli/internal/transfer"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitUsage   = 2
	defaultPage = 20
)

// exitError carries the exit code of an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr is a usage error (exit 2).
func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// IO is where a run reads and writes.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
}

// app is one run of the command line.
type app struct {
	io    IO
	json  bool
	quiet bool
	stdin *bufio.Reader
}

// Main runs the command line with args (without the program's name) and returns its
// exit code.
func Main(ctx context.Context, args []string, stdio IO) int {
	a := &app{io: stdio, stdin: newLineReader(stdio.In)}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitUsage // cobra's own errors: unknown commands and flags, wrong arguments
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	a.printError(err, code)
	return code
}

func (a *app) printError(err error, code int) {
	msg := err.Error()
	if msg == context.Canceled.Error() {
		msg = "interrupted"
	}
	if a.json {
		doc := map[string]any{"error": msg, "exit_code": code}
		if s := api.StatusOf(err); s != 0 {
			doc["status"] = s
		}
		b, _ := json.Marshal(doc)
		fmt.Fprintln(a.io.Err, string(b))
		return
	}
	fmt.Fprintln(a.io.Err, "shipfile: "+printable.String(msg))
	if code == ExitUsage {
		fmt.Fprintln(a.io.Err, "Run 'shipfile --help' for usage.")
	}
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "shipfile",
		Short: "Send and fetch files through a shipfile server",
		Long: `shipfile sends files to people and fetches what they send, through a shipfile
server's REST API. Uploads go on where they stopped when the same command runs again;
downloads go on with Range requests; every file's SHA-256 is checked against the
server's. Exit codes: 0 done, 1 failed, 2 usage. --json prints one JSON document on
standard output (see docs/CLI.md).

Settings: SHIPFILE_URL and SHIPFILE_TOKEN override what 'shipfile login' stored.`,
		Version:       Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Args stays cobra's default for a root with subcommands: an unknown command
		// is an error (exit 2), not the help.
		RunE: func(cmd *cobra.Command, argv []string) error {
			cmd.SetOut(a.io.Err) // standard output is for results only
			_ = cmd.Help()
			return usageErr("no command given")
		},
	}
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print one JSON document on standard output (for scripts)")
	root.PersistentFlags().BoolVarP(&a.quiet, "quiet", "q", false, "no progress output")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
	root.AddCommand(a.loginCmd(), a.whoamiCmd(), a.sendCmd(), a.requestCmd(), a.getCmd(),
		a.lsCmd(), a.showCmd(), a.releaseCmd(), a.revokeCmd(), a.rmCmd(), a.tokensCmd(), a.keyCmd(), a.quotaCmd())
	root.SetVersionTemplate("shipfile {{.Version}}\n")
	// cobra's completion command, shipfile completion bash|zsh|fish|powershell; without
	// a shell it is a usage error (exit 2), not its help.
	root.SetOut(a.io.Out) // the completion command keeps the writer it is made with
	root.SetErr(a.io.Err)
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.RunE = func(cmd *cobra.Command, argv []string) error {
				cmd.SetOut(a.io.Err)
				_ = cmd.Help()
				if len(argv) > 0 {
					return usageErr("no completion for %q: bash, zsh, fish or powershell", argv[0])
				}
				return usageErr("no shell given: bash, zsh, fish or powershell")
			}
		}
	}
	return root
}

// run wraps a command's work: its errors fail the run (exit 1) unless they say otherwise.
func run(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		if err == nil {
			return nil
		}
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		return &exitError{code: ExitFailed, err: err}
	}
}

// args checks the number of arguments: a usage error (exit 2) otherwise.
func args(lo, hi int) cobra.PositionalArgs {
	return func(_ *cobra.Command, a []string) error {
		if len(a) < lo || (hi >= 0 && len(a) > hi) {
			switch {
			case lo == hi:
				return usageErr("expected %d argument(s), got %d", lo, len(a))
			case hi < 0:
				return usageErr("expected at least %d argument(s), got %d", lo, len(a))
			default:
				return usageErr("expected %d to %d arguments, got %d", lo, hi, len(a))
			}
		}
		return nil
	}
}

// client is the API client of the stored (or SHIPFILE_URL / SHIPFILE_TOKEN) settings.
func (a *app) client() (*api.Client, error) {
	s, _, err := config.Load()
	if err != nil {
		return nil, err
	}
	if u := os.Getenv("SHIPFILE_URL"); u != "" {
		s.URL = u
	}
	if t := os.Getenv("SHIPFILE_TOKEN"); t != "" {
		s.Token = t
	}
	if s.URL == "" || s.Token == "" {
		return nil, errors.New("not logged in: run 'shipfile login --url URL' (or set SHIPFILE_URL and SHIPFILE_TOKEN)")
	}
	return api.New(s.URL, s.Token)
}

// output prints v as JSON under --json, else calls text.
func (a *app) output(v any, text func(w io.Writer)) error {
	if a.json {
		enc := json.NewEncoder(a.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(a.io.Out)
	return nil
}

// note writes a line for people on standard error (never under --json or --quiet), its
// control and format characters escaped (printable).
func (a *app) note(format string, args ...any) {
	if a.json || a.quiet {
		return
	}
	fmt.Fprintln(a.io.Err, printable.String(fmt.Sprintf(format, args...)))
}

// progress picks how transfers show progress: bars when standard error is a terminal,
// plain lines when it is not, nothing under --quiet (or --json off a terminal).
func (a *app) progress() transfer.Progress {
	if a.quiet {
		return progress.None{}
	}
	if f, ok := a.io.Err.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return progress.Bars{W: a.io.Err}
	}
	if a.json {
		return progress.None{}
	}
	return progress.Lines{W: a.io.Err, Every: 5 * time.Second}
}

// readSecret reads a password or token from standard input: without echo after a prompt
// on a terminal, else its first line.
func (a *app) readSecret(prompt string) (string, error) {
	if f, ok := a.io.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(a.io.Err, prompt)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.io.Err)
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	line, err := a.stdin.ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		if errors.Is(err, io.EOF) {
			return "", errors.New("standard input is empty: " + strings.TrimSuffix(strings.ToLower(prompt), ": ") + " expected there")
		}
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// readPassphrase reads the passphrase of an encrypted send from standard input (asked
// twice on a terminal: a mistyped one would lock the files away for good).
func (a *app) readPassphrase() (string, error) {
	pass, err := a.readSecret("Passphrase for the files: ")
	if err != nil {
		return "", err
	}
	if len([]rune(pass)) < crypt.MinPassphrase {
		return "", usageErr("the passphrase must have at least %d characters", crypt.MinPassphrase)
	}
	if f, ok := a.io.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		again, err := a.readSecret("The same passphrase again: ")
		if err != nil {
			return "", err
		}
		if again != pass {
			return "", usageErr("the two passphrases differ")
		}
	}
	return pass, nil
}

// newLineReader reads standard input line by line.
func newLineReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
