#!/usr/bin/env bash
# Runs the GPU bundle here as the bare device machine would (README "GPU device
# run"): tools/gpu/run.sh from a fresh copy of the working tree and the bundle,
# with an empty environment (env -i), the checkout's parent folder hidden (so
# the paths the tests compiled in are missing, as there), and the system's
# copies of the bundled libraries hidden (LLVM, OpenBLAS, Open MPI, z3, ...),
# so that a library missing from the bundle fails here. Without a GPU every
# test binary must start and its GPU cases skip with their message.
#
#   tools/gpu/check_local.sh [run.sh arguments]
#
# Needs root and unshare (a private mount namespace); without them it runs
# only with env -i and says so. Results: the copy's folder, printed at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$root/.gpu-bundle/kiln-gpu.tar.xz" ] || { echo "check_local: run tools/gpu/bundle.sh first" >&2; exit 1; }
copy=$(mktemp -d /tmp/kiln-gpu-copy.XXXXXX)
out=$copy.out
mkdir -p "$out"
# What the device tool sends: tracked and untracked-but-not-ignored files, and the carried bundle.
(cd "$root" && git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
  [ -e "$f" ] && cp --parents -P "$f" "$copy/"
done)
cp -r "$root/.gpu-bundle" "$copy/"
echo "check_local: copy in $copy ($(du -sh "$copy" | cut -f1)), results in $out"

# The system's copies of what the bundle brings, except what this shell's own
# tools load (bash: libtinfo, xz: liblzma, python3: libz).
hide=()
while read -r f; do
  f=$(readlink -f "$f")
  case "$(basename "$f")" in libz.so* | liblzma.so* | libtinfo.so*) continue ;; esac
  [ -f "$f" ] && hide+=("$f")
done < <(sed -n 's/^  lib\/[^ ]* .* from \(\/.*\)$/\1/p' "$root/.gpu-bundle/MANIFEST.txt" | grep -v "^$root")
parent=$(dirname "$root")

run=(env -i PATH=/usr/bin:/bin HOME=/tmp/kiln-gpu-home OUT="$out" bash tools/gpu/run.sh "$@")
t0=$EPOCHREALTIME
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
  echo "check_local: hiding $parent and ${#hide[@]} system libraries: ${hide[*]##*/}"
  # shellcheck disable=SC2016
  unshare -m bash -c '
    set -e
    parent=$1 copy=$2; shift 2
    mount -t tmpfs none "$parent"
    [ -d /usr/lib/llvm-19 ] && mount -t tmpfs none /usr/lib/llvm-19
    while [ "$1" != -- ]; do mount --bind /dev/null "$1"; shift; done
    shift
    cd "$copy" && exec "$@"' _ "$parent" "$copy" "${hide[@]}" -- "${run[@]}" && rc=0 || rc=$?
else
  echo "check_local: no private mount namespace here: env -i only (the system's libraries stay visible)"
  (cd "$copy" && "${run[@]}") && rc=0 || rc=$?
fi
echo "check_local: run.sh exited $rc after $(awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s (wall); results in $out: $(ls "$out" | tr '\n' ' ')"
exit $rc
