package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/internal/config"
)

// Version names a worker's build in a Worker Deployment (see "Deploying a
// new version" in docs/operations.md). The zero Version is an unversioned
// worker, which takes any task of the queue.
//
// Every ctxflow workflow is auto-upgrade: a running session, a paused
// task or a corrective loop moves to the current version at its next
// workflow task. That is safe because every workflow change is gated by
// GetVersion and proven by replaying recorded histories, and it lets the
// old version's workers stop as soon as the new one is current, however
// long a session lives. (Pinning would keep them running for as long as
// the longest session.)
type Version struct {
	Deployment string
	BuildID    string
}

// VersionOf is the version cfg gives this process's worker:
// CTXFLOW_DEPLOYMENT, with CTXFLOW_BUILD_ID or else the binary's own build
// id (its Go build ID).
func VersionOf(cfg config.Config) Version {
	if cfg.Deployment == "" {
		return Version{}
	}
	id := cfg.BuildID
	if id == "" {
		id = buildID()
	}
	return Version{Deployment: cfg.Deployment, BuildID: id}
}

func (v Version) String() string {
	if v.Deployment == "" {
		return "unversioned"
	}
	return v.Deployment + ":" + v.BuildID
}

// options are the worker's deployment options.
func (v Version) options() sdkworker.DeploymentOptions {
	if v.Deployment == "" {
		return sdkworker.DeploymentOptions{}
	}
	return sdkworker.DeploymentOptions{
		UseVersioning:             true,
		Version:                   sdkworker.WorkerDeploymentVersion{DeploymentName: v.Deployment, BuildID: v.BuildID},
		DefaultVersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
	}
}

// Promote makes v its deployment's current version: new workflows start
// on it and running ones move to it at their next workflow task. The
// server refuses a version none of whose workers has polled yet; Promote
// asks again every half second until one has, or ctx ends.
func Promote(ctx context.Context, c client.Client, v Version) error {
	if v.Deployment == "" || v.BuildID == "" {
		return errors.New("promote: a version needs a deployment and a build id")
	}
	h := c.WorkerDeploymentClient().GetHandle(v.Deployment)
	for {
		_, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: v.BuildID})
		if err == nil {
			return nil
		}
		var notFound *serviceerror.NotFound
		var precondition *serviceerror.FailedPrecondition
		if !errors.As(err, &notFound) && !errors.As(err, &precondition) {
			return fmt.Errorf("promote %s: %w", v, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promote %s: no worker of it has polled yet (%w): %w", v, err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// DeploymentStatus is a deployment's current version and the versions it
// tracks, with their drainage (whether workflows still run on them).
type DeploymentStatus struct {
	Current  string          `json:"current"`
	Versions []VersionStatus `json:"versions"`
}

// VersionStatus is one version of a deployment.
type VersionStatus struct {
	BuildID   string    `json:"buildId"`
	CreatedAt time.Time `json:"createdAt"`
	// Drainage is "draining" (workflows may still need it), "drained"
	// (none does: its workers can go) or "" (current, or not known yet).
	Drainage string `json:"drainage,omitempty"`
}

// Status describes a deployment.
func Status(ctx context.Context, c client.Client, deployment string) (DeploymentStatus, error) {
	d, err := c.WorkerDeploymentClient().GetHandle(deployment).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return DeploymentStatus{}, fmt.Errorf("describe deployment %s: %w", deployment, err)
	}
	var st DeploymentStatus
	if cur := d.Info.RoutingConfig.CurrentVersion; cur != nil {
		st.Current = cur.BuildID
	}
	for _, s := range d.Info.VersionSummaries {
		vs := VersionStatus{BuildID: s.Version.BuildID, CreatedAt: s.CreateTime}
		switch s.DrainageStatus {
		case client.WorkerDeploymentVersionDrainageStatusDraining:
			vs.Drainage = "draining"
		case client.WorkerDeploymentVersionDrainageStatusDrained:
			vs.Drainage = "drained"
		}
		st.Versions = append(st.Versions, vs)
	}
	return st, nil
}
