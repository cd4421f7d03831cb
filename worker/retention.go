package worker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	_ "modernc.org/sqlite" // the embedded server's database, for embeddedScrub

	"github.com/ctxflow/ctxflow/internal/config"
	"github.com/ctxflow/ctxflow/workflows"
)

// EnsureRetentionSchedule creates (or brings up to date) the schedule
// that starts the retention sweep every cfg.RetentionSweep when a
// retention period is set (CTXFLOW_RETENTION), and deletes it when none
// is. Every worker does it at start-up; the schedule is the cluster's, so
// the sweep runs once per interval however many workers there are, each
// sweep on any one of them (workers must share CTXFLOW_RETENTION).
func EnsureRetentionSchedule(ctx context.Context, c client.Client, cfg config.Config, log *slog.Logger) error {
	on := false
	for _, d := range cfg.Retention {
		on = on || d > 0
	}
	h := c.ScheduleClient().GetHandle(ctx, workflows.RetentionScheduleID)
	if !on {
		err := h.Delete(ctx)
		var notFound *serviceerror.NotFound
		if err != nil && !errors.As(err, &notFound) {
			return fmt.Errorf("delete the retention schedule: %w", err)
		}
		return nil
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.RetentionSweep}}}
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID: workflows.RetentionScheduleID, Spec: spec, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{
			ID: workflows.RetentionScheduleID, Workflow: workflows.RetentionWorkflowName, TaskQueue: workflows.TaskQueue,
		},
	})
	if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		err = h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec = &spec
			return &client.ScheduleUpdate{Schedule: &s}, nil
		}})
	}
	if err != nil {
		return fmt.Errorf("retention schedule: %w", err)
	}
	log.Info("retention sweep scheduled", "every", cfg.RetentionSweep, "tenants", len(cfg.Retention))
	return nil
}

// embeddedScrub returns the eraser's last step when the data dir holds
// the embedded Temporal server's database (`ctxflow dev`, and a worker on
// its data dir): the server deletes with SQLite's secure_delete (so the
// database files keep no deleted bytes), but a write-ahead log keeps the
// pages as they were until it is checkpointed and truncated. That is done
// to the main database and to the visibility records' file (the sessions'
// search attributes), each if it exists.
func embeddedScrub(dataDir string) func(context.Context) error {
	dir := filepath.Join(dataDir, "temporal") // `ctxflow dev`'s folder
	// devserver.DatabaseFileName and devserver.VisibilityFileName
	files := []string{filepath.Join(dir, "temporal.db"), filepath.Join(dir, "visibility.db")}
	return func(ctx context.Context) error {
		for _, path := range files {
			if err := truncateWAL(ctx, path); err != nil {
				return err
			}
		}
		return nil
	}
}

// truncateWAL checkpoints the SQLite database at path and truncates its
// write-ahead log, waiting while the server holds it; nothing if there is
// no such file.
func truncateWAL(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err != nil {
		return nil //nolint:nilerr // no embedded server's file here
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	for attempt := 0; ; attempt++ {
		var busy, logPages, done int
		err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done)
		if err == nil && busy == 0 {
			return nil
		}
		if attempt == 40 {
			return fmt.Errorf("checkpoint %s: busy %d, error %v", path, busy, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
