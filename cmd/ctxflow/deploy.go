package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/internal/config"
	"github.com/ctxflow/ctxflow/worker"
)

// promoteWait bounds how long promote waits for a worker of the version
// to poll.
const promoteWait = 2 * time.Minute

// runDeploy is `ctxflow deploy promote [--build ID]` (the version's
// workers take the tasks from now on) and `ctxflow deploy status` (the
// deployment's versions, as JSON).
func runDeploy(ctx context.Context, c client.Client, cfg config.Config, args []string, out io.Writer) error {
	if cfg.Deployment == "" {
		return errors.New("deploy: CTXFLOW_DEPLOYMENT is not set: workers are unversioned")
	}
	if len(args) == 0 {
		return errors.New("deploy: want promote [--build ID] or status")
	}
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	build := fs.String("build", cfg.BuildID, "")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return fmt.Errorf("deploy %s: bad arguments %q", args[0], args[1:])
	}
	switch args[0] {
	case "promote":
		if *build == "" {
			return errors.New("deploy promote: name the version with --build or CTXFLOW_BUILD_ID")
		}
		v := worker.Version{Deployment: cfg.Deployment, BuildID: *build}
		ctx, cancel := context.WithTimeout(ctx, promoteWait)
		defer cancel()
		if err := worker.Promote(ctx, c, v); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s is the current version: new workflows start on it, running ones move to it at their next task\n", v)
		return nil
	case "status":
		st, err := worker.Status(ctx, c, cfg.Deployment)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return fmt.Errorf("deploy: unknown subcommand %q: want promote or status", args[0])
}
