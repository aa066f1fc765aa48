#!/usr/bin/env bash
# Rewrites api/: the exported API of every public package of the library,
# one file per package (api/leasing/server.txt for leasing/server), from the
# code as it is now. Run it after changing an exported name and commit api/
# with the change; scripts/apicheck.sh (in .ci/run) fails until you do.
set -euo pipefail
cd "$(dirname "$0")/.."
go run ./tools/internal/apifiles "$@"
