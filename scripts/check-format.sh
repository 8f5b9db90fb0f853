#!/usr/bin/env bash
# Fails (exit 1) when a tracked C++ or CUDA source is not formatted as .clang-format says, and
# lists the files. Fix with: git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format -i
#
#   scripts/check-format.sh [repository root]     (default: the repository of this script)
#
# Uses Debian 12's clang-format (14); another version may format a few constructs differently.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$ROOT"
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed" >&2; exit 2; }
bad=()
while IFS= read -r -d '' f; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files -z '*.h' '*.cpp' '*.cu' '*.cuh')
if ((${#bad[@]})); then
  printf '%s\n' "${bad[@]}"
  echo "check-format: ${#bad[@]} file(s) differ from .clang-format ($(clang-format --version))" >&2
  exit 1
fi
echo "check-format: ok"
