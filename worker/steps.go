package worker

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/workflows"
)

// stepsInterceptor gives every workflow the worker runs its step publisher
// (workflows.StepsContextKey), so that a session's turn steps reach the
// API's streams as they start and end (nil: through the turn query only).
func stepsInterceptor(publish workflows.StepPublisher) interceptor.WorkerInterceptor {
	return &steps{publish: publish}
}

type steps struct {
	interceptor.WorkerInterceptorBase
	publish workflows.StepPublisher
}

func (s *steps) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &stepsInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, publish: s.publish}
}

type stepsInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	publish workflows.StepPublisher
}

func (s *stepsInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if s.publish != nil {
		ctx = workflow.WithValue(ctx, workflows.StepsContextKey{}, s.publish)
	}
	return s.Next.ExecuteWorkflow(ctx, in)
}
