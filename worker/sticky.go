package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
)

// A worker keeps the workflows it ran in its cache and asks the server to
// send their next workflow tasks (and queries) to its own sticky queue.
// When the worker stops (SIGTERM) it tells the server, which unloads that
// queue: the next task goes to the shared queue at once. When it is
// killed, the server sees no goodbye, keeps the queue for 10 s after its
// last poll and offers each task there until the sticky schedule-to-start
// timeout (5 s) passes: a session's first turn, and every query, waited
// 5 s after a crash.
//
// StickyQueues closes that gap on one data directory: every worker
// records its sticky queue in a file there (locked while it lives) and a
// new worker, at start, unloads the queues of the workers that died, as
// they would have on a clean stop (the ShutdownWorker call). A worker that
// starts on another host, without the data directory, cannot see them:
// there the sticky timeout still applies.
type StickyQueues struct {
	dir  string
	log  *slog.Logger
	once sync.Once
	mu   sync.Mutex
	file *os.File // this worker's record, locked until it exits
	path string   // its name
}

// stickyRecord is what a worker's file holds.
type stickyRecord struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"stickyQueue"`
	Identity  string `json:"identity"`
	Started   string `json:"started"`
}

// NewStickyQueues keeps its records under dataDir/workers.
func NewStickyQueues(dataDir string, log *slog.Logger) *StickyQueues {
	return &StickyQueues{dir: filepath.Join(dataDir, "workers"), log: log}
}

// ClientOptions adds the interceptor that records this worker's sticky
// queue (from its first poll there) to the client's options.
func (q *StickyQueues) ClientOptions(o *client.Options) {
	o.ConnectionOptions.DialOptions = append(o.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(q.intercept))
}

func (q *StickyQueues) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if p, ok := req.(*workflowservice.PollWorkflowTaskQueueRequest); ok && p.GetTaskQueue().GetKind() == enumspb.TASK_QUEUE_KIND_STICKY {
		q.once.Do(func() {
			rec := stickyRecord{Namespace: p.GetNamespace(), Queue: p.GetTaskQueue().GetName(), Identity: p.GetIdentity(), Started: time.Now().UTC().Format(time.RFC3339)}
			if err := q.record(rec); err != nil {
				q.log.Warn("sticky queue not recorded: after a crash of this worker, its sessions wait the sticky timeout", "dir", q.dir, "error", err)
			}
		})
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// record writes rec to a new file, locked before it takes its name so that
// no other worker ever sees it unlocked while this one lives.
func (q *StickyQueues) record(rec stickyRecord) error {
	if err := os.MkdirAll(q.dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(q.dir, ".new-*")
	if err != nil {
		return err
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	data, _ := json.Marshal(rec)
	name := filepath.Join(q.dir, fmt.Sprintf("%d-%d.sticky", os.Getpid(), time.Now().UnixNano()))
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), name); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	q.mu.Lock()
	q.file, q.path = f, name
	q.mu.Unlock()
	return nil
}

// Close removes this worker's record (a stopped worker has said goodbye).
func (q *StickyQueues) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.file != nil {
		_ = os.Remove(q.path)
		_ = q.file.Close()
		q.file = nil
	}
}

// ReleaseDead unloads the sticky queue of every recorded worker that is
// gone (its file is not locked any more) and removes its record; it
// returns how many. A queue of a live worker is never touched (it holds
// its lock); unloading one by mistake would only cost that worker its
// cache for the workflows concerned.
func (q *StickyQueues) ReleaseDead(ctx context.Context, svc workflowservice.WorkflowServiceClient) (int, error) {
	paths, err := filepath.Glob(filepath.Join(q.dir, "*.sticky"))
	if err != nil || len(paths) == 0 {
		return 0, err
	}
	if tmp, _ := filepath.Glob(filepath.Join(q.dir, ".new-*")); len(tmp) > 0 { // of workers killed while recording
		for _, p := range tmp {
			if f, err := os.Open(p); err == nil {
				if tryLockFile(f) {
					_ = os.Remove(p)
				}
				_ = f.Close()
			}
		}
	}
	self := fmt.Sprintf("ctxflow worker %d@", os.Getpid())
	if h, err := os.Hostname(); err == nil {
		self += h
	}
	released := 0
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			continue // released by another new worker
		}
		if !tryLockFile(f) { // its worker lives, or another new worker is releasing it
			_ = f.Close()
			continue
		}
		var rec stickyRecord
		data, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err == nil && rec.Queue != "" {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = svc.ShutdownWorker(cctx, &workflowservice.ShutdownWorkerRequest{
				Namespace: rec.Namespace, StickyTaskQueue: rec.Queue, Identity: self,
				Reason: "ctxflow: the worker " + rec.Identity + " is gone (its lock was released); its sessions move to the shared queue",
			})
			cancel()
			if err != nil {
				_ = f.Close()
				q.log.Warn("could not release a dead worker's sticky queue", "queue", rec.Queue, "worker", rec.Identity, "error", err)
				continue // tried again by the next worker to start
			}
			released++
			q.log.Info("released the sticky queue of a worker that is gone", "queue", rec.Queue, "worker", rec.Identity, "since", rec.Started)
		}
		_ = os.Remove(path)
		_ = f.Close()
	}
	return released, nil
}
