package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/workflows"
)

// runErase erases a tenant (or one of its sessions, --session) for good
// through the workers of the cluster, and prints what was removed. The
// workers write the audit line; the actor is "cli:" and the OS user.
func runErase(ctx context.Context, c client.Client, namespace string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("erase", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tenant := fs.String("tenant", "", "")
	session := fs.String("session", "", "")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	if fs.NArg() > 0 || *tenant == "" {
		return errors.New("erase: want --tenant T [--session ID]")
	}
	if err := workflows.ValidateID("tenant", *tenant); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	if *session != "" {
		if err := workflows.ValidateID("sessionId", *session); err != nil {
			return fmt.Errorf("erase: %w", err)
		}
	}
	actor := "cli"
	if u := os.Getenv("USER"); u != "" {
		actor += ":" + u
	}
	req := activities.EraseRequest{Tenant: *tenant, SessionID: *session, Actor: actor}
	n, err := api.Erase(ctx, c, namespace, "cli-"+randomID(), req)
	if err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	what := "tenant " + *tenant
	if *session != "" {
		what = "session " + *session + " of tenant " + *tenant
	}
	fmt.Fprintf(out, "erased %s: %d sessions, %d messages, %d workflow runs, %d documents, %d chunks, %d uploads\n",
		what, n.Sessions, n.Messages, n.Executions, n.Documents, n.Chunks, n.Blobs)
	return nil
}

func randomID() string {
	var b strings.Builder
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	buf := make([]byte, 12)
	if _, err := rand.Read(buf); err != nil {
		return "x"
	}
	for _, x := range buf {
		b.WriteByte(digits[int(x)%len(digits)])
	}
	return b.String()
}
