#!/usr/bin/env bash
# Runs p4c's front end (the one bf-p4c uses) on every TNA program under p4/.
# The checker ships in ../shared/tools/p4c next to the repository on developer
# and CI machines; elsewhere (a user's checkout) the check is skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
chk="$top/../shared/tools/p4c/check.sh"
if [ ! -x "$chk" ]; then
  echo "p4check: skipped: p4c checker not found at $chk (it ships only beside the repository on dev/CI machines)"
  exit 0
fi
mapfile -t progs < <(grep -rlE '^\s*(Pipeline|Switch)\s*\(' "$here" --include='*.p4' 2>/dev/null | sort)
if [ ${#progs[@]} -eq 0 ]; then
  echo "p4check: no P4 programs under p4/ yet"
  exit 0
fi
fail=0
for f in "${progs[@]}"; do
  if out=$(timeout 60 "$chk" "$f" "$(dirname "$f")" "$here" 2>&1); then
    echo "p4check: ok   ${f#$top/}"
  else
    echo "p4check: FAIL ${f#$top/}"; echo "$out" | head -20; fail=1
  fi
done
exit $fail
