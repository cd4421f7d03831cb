package devserver

import (
	"testing"

	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
)

// TestPostgresStore: the URLs of scripts/cluster.sh become the postgres
// plugin's settings; anything else is refused.
func TestPostgresStore(t *testing.T) {
	s, err := PostgresStore("postgres://ctxflow:pw@127.0.0.1:5433/temporal?sslmode=disable", "postgresql://ctxflow@db/temporal_visibility")
	if err != nil {
		t.Fatal(err)
	}
	d, v := s.Default, s.Visibility
	if d.PluginName != postgresql.PluginNamePGX || d.DatabaseName != "temporal" || d.ConnectAddr != "127.0.0.1:5433" ||
		d.User != "ctxflow" || d.Password != "pw" || d.ConnectAttributes["sslmode"] != "disable" {
		t.Errorf("default store %+v", d)
	}
	if v.DatabaseName != "temporal_visibility" || v.ConnectAddr != "db:5432" || v.Password != "" {
		t.Errorf("visibility store %+v", v)
	}
	for _, bad := range []string{"", "mysql://h/db", "postgres://h", "postgres:///db", "::"} {
		if _, err := PostgresStore(bad, "postgres://h/v"); err == nil {
			t.Errorf("PostgresStore(%q) accepted", bad)
		}
	}
}
