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
// missing and adds the session search attributes. A namespace just
// created reaches every service of the cluster within seconds (their
// namespace caches): the search attributes are tried until it has, for at
// most wait.
func PrepareNamespace(ctx context.Context, c client.Client, namespace string, retention, wait time.Duration) error {
	if _, err := RegisterNamespace(ctx, c, namespace, retention); err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	for {
		err := RegisterSearchAttributes(ctx, c, namespace)
		var notFound *serviceerror.NamespaceNotFound
		if err == nil || !errors.As(err, &notFound) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
