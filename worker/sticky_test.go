package worker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

type shutdownRecorder struct {
	workflowservice.WorkflowServiceClient
	queues []string
}

func (s *shutdownRecorder) ShutdownWorker(_ context.Context, r *workflowservice.ShutdownWorkerRequest, _ ...grpc.CallOption) (*workflowservice.ShutdownWorkerResponse, error) {
	s.queues = append(s.queues, r.GetNamespace()+"/"+r.GetStickyTaskQueue())
	return &workflowservice.ShutdownWorkerResponse{}, nil
}

// A live worker's record is left alone (it holds its lock); a dead one's
// queue is unloaded once and its record removed; a stopped worker removes
// its own.
func TestStickyQueuesReleaseOnlyTheDead(t *testing.T) {
	dir := t.TempDir()
	live := NewStickyQueues(dir, slog.Default())
	if err := live.record(stickyRecord{Namespace: "ns", Queue: "host:live"}); err != nil {
		t.Skipf("no file locks: %v", err)
	}
	dead := filepath.Join(dir, "workers", "1-1.sticky") // no process holds its lock
	if err := os.WriteFile(dead, []byte(`{"namespace":"ns","stickyQueue":"host:dead","identity":"1@host@"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	svc := &shutdownRecorder{}
	n, err := NewStickyQueues(dir, slog.Default()).ReleaseDead(t.Context(), svc)
	if err != nil || n != 1 || len(svc.queues) != 1 || svc.queues[0] != "ns/host:dead" {
		t.Fatalf("released %d %v: %v", n, svc.queues, err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the dead worker's record is still there: %v", err)
	}
	if n, _ := NewStickyQueues(dir, slog.Default()).ReleaseDead(t.Context(), svc); n != 0 {
		t.Fatalf("released the live worker's queue: %v", svc.queues)
	}
	live.Close()
	if left, _ := filepath.Glob(filepath.Join(dir, "workers", "*")); len(left) != 0 {
		t.Fatalf("records left after a clean stop: %v", left)
	}
}
