package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/crypt"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// keyExport is `shipfile key export --json`.
type keyExport struct {
	PublicKey string `json:"public_key"`
	Identity  string `json:"identity"`
}

func (a *app) keyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Your encryption key for file requests: show it (create or export it)",
		Long: `Your age key pair, with which file requests of yours are encrypted end to end (the
request page encrypts every upload to your public key). The server keeps the public key
and the private key sealed by your passphrase (age's scrypt): it cannot open either the
key or the files.

  shipfile key                 the public key (age1...)
  shipfile key create          make the key pair; the passphrase is read from standard input
  shipfile key export          the private key (AGE-SECRET-KEY-1...), after the passphrase,
                               for 'age -d -i key.txt file.age'`,
		Args: args(0, 0),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			k, err := a.getKey(cmd.Context())
			if err != nil {
				return err
			}
			return a.output(k, func(w io.Writer) { fmt.Fprintln(w, k.PublicKey) })
		}),
	}
	var replace bool
	create := &cobra.Command{
		Use:   "create [--replace]",
		Short: "Make your encryption key pair, sealed by a passphrase read from standard input",
		Long: `Make an age key pair for your file requests. The private key is sealed by a passphrase
(at least 8 characters, read from standard input, asked twice on a terminal) before it
leaves this machine. With --replace an existing key is replaced: files sealed to the old
key stay readable only with the old key (export it first).`,
		Args: args(0, 0),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if !replace {
				if k, err := a.getKey(ctx); err == nil {
					return fmt.Errorf("you have an encryption key already (%s): files sent to it open only with it; give --replace to make another", k.PublicKey)
				} else if api.StatusOf(err) != http.StatusNotFound {
					return err
				}
			}
			pass, err := a.readPassphrase()
			if err != nil {
				return err
			}
			identity, err := age.GenerateX25519Identity()
			if err != nil {
				return err
			}
			sealed, err := crypt.Seal(identity.String(), pass)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.API.PutMyKeyWithResponse(ctx, apiclient.PutUserKey{PublicKey: identity.Recipient().String(), SealedIdentity: sealed})
			if err := api.Expect(r, err, http.StatusOK); err != nil {
				return err
			}
			k := r.JSON200
			a.note("Your encryption key is made; its private half is sealed by your passphrase (keep it: without it nobody can open files sent to this key)")
			return a.output(k, func(w io.Writer) { fmt.Fprintln(w, k.PublicKey) })
		}),
	}
	create.Flags().BoolVar(&replace, "replace", false, "replace an existing key")
	export := &cobra.Command{
		Use:   "export",
		Short: "Print your private key (after the passphrase, read from standard input)",
		Args:  args(0, 0),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			k, err := a.getKey(cmd.Context())
			if err != nil {
				return err
			}
			id, err := a.unsealKey(k)
			if err != nil {
				return err
			}
			out := keyExport{PublicKey: k.PublicKey, Identity: id.String()}
			return a.output(out, func(w io.Writer) {
				fmt.Fprintf(w, "# public key: %s\n%s\n", out.PublicKey, out.Identity)
			})
		}),
	}
	cmd.AddCommand(create, export)
	return cmd
}

// getKey is the user's key object; an *api.Error of status 404 when there is none.
func (a *app) getKey(ctx context.Context) (*apiclient.UserKey, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	r, err := c.API.GetMyKeyWithResponse(ctx)
	if err := api.Expect(r, err, http.StatusOK); err != nil {
		if api.StatusOf(err) == http.StatusNotFound {
			return nil, &api.Error{Status: http.StatusNotFound, Detail: "you have no encryption key yet: make one with 'shipfile key create'"}
		}
		return nil, err
	}
	return r.JSON200, nil
}

// unsealKey opens the user's sealed key with the passphrase from standard input.
func (a *app) unsealKey(k *apiclient.UserKey) (*age.X25519Identity, error) {
	pass, err := a.readSecret("Passphrase of your key: ")
	if err != nil || pass == "" {
		return nil, errors.New("your key needs its passphrase: pipe it on stdin (or run the command on a terminal to be asked for it)")
	}
	id, err := crypt.Unseal(k.SealedIdentity, pass)
	if crypt.IsWrongKey(err) {
		return nil, errors.New("the passphrase does not open your key: a wrong passphrase?")
	}
	if err != nil {
		return nil, fmt.Errorf("your sealed key does not open: %w", err)
	}
	if crypt.RecipientOf(id) != k.PublicKey {
		return nil, fmt.Errorf("your sealed key is not the one of your public key %s", k.PublicKey)
	}
	return id, nil
}
