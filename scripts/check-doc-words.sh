#!/usr/bin/env bash
# Fails (exit 1) when the documentation or the sources speak of the development process instead of
# the product: development sessions ("Session 6"), numbered calls or training runs ("call 3",
# "run 52", "runs 47 and 48"), issue numbers ("issue 8", "#8"), the external specification
# (vae_spec) or docs/tiling.md, which does not exist. History belongs in git.
#
#   scripts/check-doc-words.sh [repository root]     (default: the repository of this script)
#
# Checked: every *.md under the root (except build*/, .git/, out/ and .demo-data/), and the
# sources, scripts and build files under core/ gpu/ ui/ app/ tests/ tools/ scripts/ cmake/
# packaging/ (*.h *.cpp *.cu *.cuh *.py *.sh *.cmake CMakeLists.txt *.yml) and
# resources/*.desktop, binary files skipped. Prints file:line:text for every hit and a summary.
set -euo pipefail

ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$ROOT"
SELF=scripts/check-doc-words.sh

# Extended regular expressions (grep -E). "#N" counts only after a line start, a space or "(",
# so #include, #pragma, colours (#c0392b, #123456) and markdown headers pass. "run N" needs two
# digits ("run 3 times" passes); "runs N and/to/-" catches ranges of numbered runs.
PATTERNS=(
  '[Ss]ession [0-9]+'
  '[Ss]essions [0-9]'
  '\b[Ii]ssues? #?[0-9]+'
  '(^|[ (])#[0-9]{1,4}\b'
  '\bvae_spec\b'
  '\b[Cc]all [0-9]+ of\b'
  '\b[Cc]alls? [0-9]+\b'
  '\b[Rr]un [0-9]{2,}\b'
  '\b[Rr]uns [0-9]+ ?(and|to|-|–)'
  'docs/tiling\.md'
)
ARGS=()
for p in "${PATTERNS[@]}"; do ARGS+=(-e "$p"); done

export LC_ALL=C
hits=$(mktemp)
trap 'rm -f "$hits" "$hits.sorted"' EXIT

# Documentation.
grep -rnIE --include='*.md' --exclude-dir='build*' --exclude-dir=.git --exclude-dir=out \
  --exclude-dir=.demo-data "${ARGS[@]}" . >> "$hits" || true

# Sources, scripts and build files.
DIRS=()
for d in core gpu ui app tests tools scripts cmake packaging; do
  [ -d "$d" ] && DIRS+=("$d")
done
if [ ${#DIRS[@]} -gt 0 ]; then
  grep -rnIE --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' \
    --include='*.py' --include='*.sh' --include='*.cmake' --include='CMakeLists.txt' \
    --include='*.yml' --exclude-dir='build*' --exclude-dir=__pycache__ "${ARGS[@]}" \
    "${DIRS[@]}" >> "$hits" || true
fi
shopt -s nullglob
desktop=(resources/*.desktop)
if [ ${#desktop[@]} -gt 0 ]; then
  grep -nIE -H "${ARGS[@]}" "${desktop[@]}" >> "$hits" || true
fi

# This script names the patterns it looks for; it is not checked.
sed -e 's|^\./||' "$hits" | grep -v "^$SELF:" | sort -t: -k1,1 -k2,2n > "$hits.sorted" || true
mv "$hits.sorted" "$hits"

count=$(wc -l < "$hits")
if [ "$count" -gt 0 ]; then
  cat "$hits"
  files=$(cut -d: -f1 "$hits" | sort -u | wc -l)
  echo "check-doc-words: $count line(s) in $files file(s) speak of development history" \
       "(sessions, calls, runs, issue numbers, vae_spec, docs/tiling.md); describe the product" >&2
  exit 1
fi
echo "check-doc-words: ok (no development-history words in docs or sources)"
