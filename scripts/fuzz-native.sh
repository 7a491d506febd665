#!/usr/bin/env bash
# Fuzzes the C envelope scanner (libs/ledger/native/envelope-scan.h, compiled into the ledger kernels addon) with
# libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer, for a bounded time.
#
#   bash scripts/fuzz-native.sh [SECONDS]     (default 60)
#
# Needs clang with libFuzzer's runtime (Debian: `apt-get install clang`; scripts/test.sh installs it in CI). Installs
# nothing itself. Runs over a copy of libs/ledger/native/fuzz/corpus/ (the committed seeds stay as they are); exits
# non-zero on any finding and says where the crashing input was saved.
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
CLANG="${CLANG:-clang}"
if ! command -v "$CLANG" >/dev/null 2>&1; then
  echo "fuzz-native: $CLANG not found; install clang (Debian: apt-get install -y clang) or set CLANG" >&2
  exit 2
fi
work="${FUZZ_WORK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/assay-fuzz.XXXXXX")}"
mkdir -p "$work/corpus" "$work/artifacts"
cp "$root"/libs/ledger/native/fuzz/corpus/* "$work/corpus/"
bin="$work/envelope-scan-fuzz"
"$CLANG" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Werror -Wall -Wextra -Wshadow -Wconversion -g -O1 -std=gnu11 \
  "$root/libs/ledger/native/fuzz/envelope-scan-fuzz.c" -o "$bin" -pthread
echo "fuzz-native: running the envelope scanner harness for ${SECONDS_TO_RUN}s (work dir $work)"
set +e
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" ASAN_OPTIONS="abort_on_error=0:detect_leaks=1" \
  "$bin" -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/fuzz.log" 2>&1
rc=$?
set -e
# Progress lines (NEW, REDUCE, pulse) stay in the log; the rest (start, findings, final stats) is shown.
grep -v '^#[0-9]*[[:space:]]*\(NEW\|REDUCE\|pulse\)' "$work/fuzz.log" | tail -n 60 || true
if [ "$rc" -ne 0 ] || ls "$work/artifacts/"* >/dev/null 2>&1; then
  echo "fuzz-native: FINDING (exit $rc); crashing input(s):" >&2
  ls -1 "$work/artifacts/" | sed "s|^|  $work/artifacts/|" >&2
  echo "fuzz-native: reproduce with: $bin <file>; then add it to libs/ledger/native/fuzz/corpus/ once fixed" >&2
  exit 1
fi
echo "fuzz-native: no findings in ${SECONDS_TO_RUN}s ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$' || echo '?') executions)"
