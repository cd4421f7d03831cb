#!/usr/bin/env bash
# Fails when a tracked file is over 1 MB: build output and data that a
# script can make again do not belong in the repository. Test data that
# must be larger goes in the allow-list below, with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
allow=(
  go.sum # pinned module hashes
)
fail=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  if [ "$size" -gt "$limit" ] && [[ ! " ${allow[*]} " == *" $f "* ]]; then
    echo "sizecheck: $f is $((size / 1024)) KiB, over the 1 MB limit (build output? data a script can make?)"
    fail=1
  fi
done < <(git ls-files -z)
[ $fail -eq 0 ] && echo "sizecheck: ok"
exit $fail
