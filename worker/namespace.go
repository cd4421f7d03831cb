package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ctxflow/ctxflow/workflows"
)

// RegisterNamespace creates the namespace, keeping closed workflows for
// retention, unless it exists (an existing one is left as it is). It
// reports whether it created it.
func RegisterNamespace(ctx context.Context, c client.Client, namespace string, retention time.Duration) (bool, error) {
	svc := c.WorkflowService()
	_, err := svc.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var notFound *serviceerror.NamespaceNotFound
	if !errors.As(err, &notFound) {
		if err != nil {
			return false, fmt.Errorf("describe namespace %s: %w", namespace, err)
		}
		return false, nil
	}
	_, err = svc.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return false, fmt.Errorf("register namespace %s: %w", namespace, err)
	}
	return err == nil, nil
}

// PrepareNamespace makes the namespace ready for sessions: it creates it if
// missing, adds the session search attributes, and returns once the
// frontend knows them. A namespace and its attributes reach the services
// of a cluster through their namespace caches, within seconds (the
// server's system.namespaceCacheRefreshInterval): until then a session
// could not start ("no mapping defined for search attribute"). Each step is
// tried again until it succeeds, for at most wait.
func PrepareNamespace(ctx context.Context, c client.Client, namespace string, retention, wait time.Duration) error {
	if _, err := RegisterNamespace(ctx, c, namespace, retention); err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	var notFound *serviceerror.NamespaceNotFound
	var invalid *serviceerror.InvalidArgument
	steps := []struct {
		call  func() error
		again func(error) bool
	}{
		{func() error { return RegisterSearchAttributes(ctx, c, namespace) },
			func(err error) bool { return errors.As(err, &notFound) }},
		{func() error { // a query on an attribute the frontend does not map is invalid
			_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
				Namespace: namespace, Query: workflows.SAttrTenant.GetName() + " = 'ctxflow-register'",
			})
			return err
		}, func(err error) bool { return errors.As(err, &invalid) || errors.As(err, &notFound) }},
	}
	for _, step := range steps {
		for {
			err := step.call()
			if err == nil {
				break
			}
			if !step.again(err) || time.Now().After(deadline) {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}
