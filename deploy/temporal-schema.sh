#!/bin/sh
# Temporal's schema on PostgreSQL, by Temporal's own temporal-sql-tool: its
# two databases (temporal, temporal_visibility) and their versioning tables
# the first time, then every versioned update not yet applied (none when
# they are up to date; after a new Temporal, its updates). The same steps
# everywhere: scripts/cluster.sh (make cluster) runs this file, the
# temporal-schema service of compose.yaml runs it in temporalio/admin-tools,
# and the Job of k8s/temporal.yaml runs the same commands.
#
# The connection is temporal-sql-tool's own variables: SQL_HOST, SQL_PORT,
# SQL_USER, SQL_PASSWORD. TEMPORAL_SQL_TOOL names the tool (default:
# temporal-sql-tool on the PATH, as in the admin-tools image).
set -eu
tool=${TEMPORAL_SQL_TOOL:-temporal-sql-tool}
for db in temporal:temporal temporal_visibility:visibility; do
  name=${db%%:*}
  schema=postgresql/v12/${db#*:}
  sql() { "$tool" --plugin postgres12 --db "$name" "$@"; }
  sql create-database >/dev/null 2>&1 || true # there after the first run
  # Versioning tables only where there are none: an update needs them.
  if ! sql update-schema --schema-name "$schema" >/dev/null 2>&1; then
    sql setup-schema -v 0.0
    sql update-schema --schema-name "$schema"
  fi
  echo "temporal-schema: $name is up to date ($schema)"
done
