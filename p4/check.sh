#!/usr/bin/env bash
# Checks every TNA program under p4/ with the tools beside the repository
# (../shared/tools, on developer and CI machines): p4c's front end, then
# bf-p4c for Tofino 1 and 2 (every build a program declares), and that
# README.md's resource table and each program's p4testgen tests are in step
# with the programs. -update rewrites the table and regenerates stale test
# sets (make p4check). Elsewhere (a user's checkout) it says so and passes.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${GO:-go}" run ./p4/internal/p4check "$@"
