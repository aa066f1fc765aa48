#!/usr/bin/env bash
# Checks that api/ is the exported API of the library as the code declares
# it: regenerates it in memory and, if the committed files differ, prints
# the lines that differ per file (- committed, + code) and the fix (run
# scripts/apifiles.sh and commit api/), and exits 1. .ci/run calls it;
# go test ./tools/internal/apifiles makes the same check.
set -euo pipefail
cd "$(dirname "$0")/.."
go run ./tools/internal/apifiles -check
