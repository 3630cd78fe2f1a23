package commands

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/config"
	"github.com/shipfile/shipfile/cli/internal/printable"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// loginResult is `shipfile login --json`.
type loginResult struct {
	URL       string        `json:"url"`
	TokenFile string        `json:"token_file"`
	User      *apiclient.Me `json:"user"`
}

func (a *app) loginCmd() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "login --url URL",
		Short: "Store the server's URL and an API token (read from SHIPFILE_TOKEN or standard input)",
		Long: `Store the server's URL and an API token in the user's config directory
(shipfile/config.json, mode 600). The token comes from SHIPFILE_TOKEN, else from
standard input (asked for without echo on a terminal). It is checked with the server
before it is stored. Make a token in the web UI (Settings → API tokens), with
'shipctl token create', or with 'shipfile tokens create'.`,
		Args: args(0, 0),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				url = os.Getenv("SHIPFILE_URL")
			}
			if url == "" {
				return usageErr("--url is required (the server's base URL, e.g. https://files.example.com)")
			}
			token := os.Getenv("SHIPFILE_TOKEN")
			if token == "" {
				t, err := a.readSecret("API token: ")
				if err != nil {
					return err
				}
				token = t
			}
			if token == "" {
				return usageErr("no token given")
			}
			c, err := api.New(url, token)
			if err != nil {
				return usageErr("%v", err)
			}
			r, err := c.API.GetMeWithResponse(cmd.Context())
			if err := api.Expect(r, err, http.StatusOK); err != nil {
				return err
			}
			path, err := config.Save(config.Settings{URL: c.Base, Token: token})
			if err != nil {
				return err
			}
			return a.output(loginResult{URL: c.Base, TokenFile: path, User: r.JSON200}, func(w io.Writer) {
				fmt.Fprintf(w, "Logged in to %s as %s <%s>; token stored in %s\n", c.Base, printable.String(r.JSON200.Name), printable.String(string(r.JSON200.Email)), path)
			})
		}),
	}
	cmd.Flags().StringVar(&url, "url", "", "the server's base URL (default $SHIPFILE_URL)")
	return cmd
}

// whoamiResult is `shipfile whoami --json`: the API's Me and the server.
type whoamiResult struct {
	URL string `json:"url"`
	apiclient.Me
}

func (a *app) whoamiCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show the user of the stored token",
		Args:  args(0, 0),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.API.GetMeWithResponse(cmd.Context())
			if err := api.Expect(r, err, http.StatusOK); err != nil {
				return err
			}
			me := r.JSON200
			return a.output(whoamiResult{URL: c.Base, Me: *me}, func(w io.Writer) {
				fmt.Fprintf(w, "%s <%s> (%s, user %d) at %s\n", printable.String(me.Name), printable.String(string(me.Email)), me.Role, me.Id, c.Base)
			})
		}),
	}
}

func (a *app) tokensCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "List your API tokens (and create or revoke one)",
		Args:  args(0, 0),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.API.ListTokensWithResponse(cmd.Context())
			if err := api.Expect(r, err, http.StatusOK); err != nil {
				return err
			}
			return a.output(r.JSON200, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tCREATED\tEXPIRES\tLAST USED")
				for _, t := range r.JSON200.Items {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", t.Id, printable.String(t.Name), t.Prefix, day(&t.CreatedAt), day(t.ExpiresAt), day(t.LastUsedAt))
				}
				tw.Flush()
			})
		}),
	}
	var expiresIn time.Duration
	create := &cobra.Command{
		Use:   "create NAME [--expires-in 720h]",
		Short: "Create an API token; the raw token is printed alone on the last line, once",
		Args:  args(1, 1),
		RunE: run(func(cmd *cobra.Command, argv []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			body := apiclient.CreateToken{Name: argv[0]}
			if expiresIn < 0 {
				return usageErr("--expires-in must be positive")
			}
			if expiresIn > 0 {
				at := time.Now().Add(expiresIn).UTC().Truncate(time.Second)
				body.ExpiresAt = &at
			}
			r, err := c.API.CreateTokenWithResponse(cmd.Context(), body)
			if err := api.Expect(r, err, http.StatusCreated); err != nil {
				return err
			}
			t := r.JSON201
			return a.output(t, func(w io.Writer) {
				fmt.Fprintf(w, "Token %d %q (expires %s); shown only now:\n%s\n", t.Id, t.Name, day(t.ExpiresAt), t.Token)
			})
		}),
	}
	create.Flags().DurationVar(&expiresIn, "expires-in", 0, "lifetime, e.g. 720h (default: no expiry, or your token's)")
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke one of your API tokens",
		Args:  args(1, 1),
		RunE: run(func(cmd *cobra.Command, argv []string) error {
			id, err := strconv.ParseInt(argv[0], 10, 64)
			if err != nil || id <= 0 {
				return usageErr("%q is not a token id (see 'shipfile tokens')", argv[0])
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.API.DeleteTokenWithResponse(cmd.Context(), id)
			if err := api.Expect(r, err, http.StatusNoContent); err != nil {
				return err
			}
			return a.output(map[string]any{"id": id, "revoked": true}, func(w io.Writer) {
				fmt.Fprintf(w, "Token %d revoked\n", id)
			})
		}),
	}
	cmd.AddCommand(create, revoke)
	return cmd
}

// day shows a time as its date and minute in UTC, "-" for none.
func day(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04")
}
