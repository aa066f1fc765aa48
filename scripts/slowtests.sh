#!/usr/bin/env bash
# Runs every test behind the slow-test gate (internal/testkit/slowtest): each test
# function that calls slowtest.Skip, found in the sources, under -race with
# SLUICE_SLOW=1. .ci/run calls it after the everyday suite; CONTRIBUTING.md
# lists the tests. Extra arguments go to go test (e.g. -v).
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A tests
while IFS=: read -r file line _; do
  name=$(head -n "$line" "$file" | grep -E '^func Test' | tail -n 1 | sed -E 's/^func (Test[A-Za-z0-9_]*).*/\1/')
  dir=./$(dirname "$file")
  tests[$dir]="${tests[$dir]:+${tests[$dir]}|}$name"
done < <(git grep -n 'slowtest\.Skip(t' -- '*_test.go')

if [ ${#tests[@]} -eq 0 ]; then
  echo "slowtests.sh: no test calls slowtest.Skip" >&2; exit 1
fi
status=0
for dir in $(printf '%s\n' "${!tests[@]}" | sort); do
  echo "--- $dir: ${tests[$dir]}"
  SLUICE_SLOW=1 go test -race -count=1 -timeout 20m -run "^(${tests[$dir]})\$" "$@" "$dir" || status=1
done
exit $status
