#!/usr/bin/env bash
# Counts the exported declarations of each public package of the library,
# and their total, as issue 36 counts them: the lines of `go doc -all PKG`
# that start a func, type, var or const declaration or a method (a const or
# var block counts once). api/ lists the API itself; this is the yardstick.
set -euo pipefail
cd "$(dirname "$0")/.."
total=0
for pkg in $(go list ./... | grep -v -e /internal -e doormanpb -e /examples -e /tools); do
  # grep -c exits 1 when it counts 0; the count is still right.
  n=$(go doc -all "$pkg" | grep -cE '^(func|type|var|const) |^func \(' || true)
  printf '%5d  %s\n' "$n" "${pkg#github.com/sluice-rpc/sluice/}"
  total=$((total + n))
done
printf '%5d  total\n' "$total"
