package devserver

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// readyTimeout bounds the wait for readiness when ctx has no earlier deadline.
const readyTimeout = time.Minute

// waitReady returns once the frontend, history and matching services answer
// requests for namespace and its search attributes are visible.
func waitReady(ctx context.Context, addr, namespace string, attrs map[string]enumspb.IndexedValueType, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to frontend %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	wf := workflowservice.NewWorkflowServiceClient(conn)
	op := operatorservice.NewOperatorServiceClient(conn)

	probes := []struct {
		name string
		call func(context.Context) error
	}{
		{"frontend", func(ctx context.Context) error {
			_, err := wf.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
			return err
		}},
		{"history", func(ctx context.Context) error {
			_, err := wf.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
				Namespace: namespace,
				Execution: &commonpb.WorkflowExecution{WorkflowId: "ctxflow-devserver-readiness-probe"},
			})
			if status.Code(err) == codes.NotFound {
				return nil // history answered
			}
			return err
		}},
		{"matching", func(ctx context.Context) error {
			_, err := wf.DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
				Namespace: namespace,
				TaskQueue: &taskqueuepb.TaskQueue{Name: "ctxflow-devserver-readiness-probe", Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			})
			return err
		}},
		{"search attributes", func(ctx context.Context) error {
			resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
			if err != nil {
				return err
			}
			var missing []string
			for name, typ := range attrs {
				if resp.GetCustomAttributes()[name] != typ {
					missing = append(missing, name)
				}
			}
			if len(missing) > 0 {
				slices.Sort(missing)
				return fmt.Errorf("search attributes %v not registered", missing)
			}
			return nil
		}},
	}
	for _, p := range probes {
		if err := retry(ctx, p.call); err != nil {
			return fmt.Errorf("temporal %s not ready: %w", p.name, err)
		}
		logger.Debug("temporal dev server probe passed", "probe", p.name)
	}
	return nil
}

// retry calls f until it succeeds or ctx ends, returning f's last error.
func retry(ctx context.Context, f func(context.Context) error) error {
	delay := 5 * time.Millisecond
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(callCtx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
