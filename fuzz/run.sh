#!/usr/bin/env bash
# Coverage-guided fuzzing of every target with AFL++ (cargo-afl, stable Rust).
#
#   fuzz/run.sh SECONDS [TARGET...]     (make fuzz FUZZ_SECONDS=N)
#
# Installs cargo-afl if needed (fuzz/install.sh), builds the instrumented
# harnesses (fuzz/afl, its own target folder), then fuzzes each target for
# SECONDS from fuzz/seeds/<target> with fuzz/dict/<target>.dict, into
# fuzz/out/<target> (not committed; a new run starts afresh). Prints, per
# target, executions, duration, executions per second, new paths, crashes and
# hangs. Exits 1 if any target crashed or hung: copy each input it lists into
# fuzz/pending/<target>/ with a test (fuzz/README.md, "Findings").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(proposal webhook scenarios registry)

bash "${here}/install.sh" >/dev/null
echo "building the instrumented harnesses (fuzz/afl/target)"
(cd "${here}/afl" && cargo afl build --release --quiet)

# A shared machine: no CPU binding, no CPU-governor or core-pattern demands,
# a plain log instead of the curses screen.
export AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1

stat() { sed -n "s/^$2 *: *//p" "$1" | head -n 1; }

# Marked as a cache folder, so the mutation runner's scratch copy (and
# backup tools) skip it.
mkdir -p "${here}/out"
printf 'Signature: 8a477f597d28d172789f06886806bc55\n# AFL++ output of fuzz/run.sh\n' >"${here}/out/CACHEDIR.TAG"

found=0
summary=()
for target in "${targets[@]}"; do
  out="${here}/out/${target}"
  rm -rf "${out}"
  mkdir -p "${out}"
  dict=()
  [ -f "${here}/dict/${target}.dict" ] && dict=(-x "${here}/dict/${target}.dict")
  echo "fuzzing ${target} for ${seconds}s (log: fuzz/out/${target}/afl.log)"
  cargo afl fuzz -V "${seconds}" -t 2000 "${dict[@]}" -i "${here}/seeds/${target}" -o "${out}" \
    -- "${here}/afl/target/release/${target}" >"${out}/afl.log" 2>&1 || {
      echo "error: afl-fuzz failed for ${target}; the end of its log:" >&2
      tail -n 30 "${out}/afl.log" >&2
      exit 1
    }
  stats="${out}/default/fuzzer_stats"
  crashes=$(find "${out}/default/crashes" -type f -name 'id:*' 2>/dev/null | wc -l)
  hangs=$(find "${out}/default/hangs" -type f -name 'id:*' 2>/dev/null | wc -l)
  line=$(printf '%-10s execs %10s  time %5ss  execs/s %8s  corpus %5s  crashes %s  hangs %s' \
    "${target}" "$(stat "${stats}" execs_done)" "$(stat "${stats}" run_time)" \
    "$(stat "${stats}" execs_per_sec)" "$(stat "${stats}" corpus_count)" "${crashes}" "${hangs}")
  summary+=("${line}")
  if [ "${crashes}" -gt 0 ] || [ "${hangs}" -gt 0 ]; then
    found=1
    find "${out}/default/crashes" "${out}/default/hangs" -type f -name 'id:*' | sed 's/^/  finding: /'
  fi
done

echo
echo "fuzz summary (${seconds}s per target):"
printf '%s\n' "${summary[@]}"
if [ "${found}" -ne 0 ]; then
  echo "findings above: reproduce with cargo test -p fuzz after copying each into fuzz/pending/<target>/" >&2
  exit 1
fi
