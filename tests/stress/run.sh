#!/usr/bin/env bash
# The load check, for developers before submitting: the suites that start real processes
# (marked `process`: services under uvicorn, the fedstats command, attacks, load) and the fault
# suite (tests/faults/), run while a CPU hog keeps 4 busy processes per core. A test that fails
# here has a deadline that load can miss, or counts events it does not mean (tests/README.md).
#
#   tests/stress/run.sh                          # everything marked process, then the rest of
#                                                # tests/faults (its in-process tests)
#   tests/stress/run.sh -m "process and not slow" # extra pytest arguments go to both runs
#   HOG_PER_CORE=2 tests/stress/run.sh           # a lighter hog
#
# The hog is stress-ng (Debian: apt-get install stress-ng) or, without it, one Python busy loop
# per hog process. Every hog process is stopped when the script ends, however it ends. Prints
# the load average before, during and after, and each run's outcome; exit 1 if a run failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-.venv/bin/python}
export PYTHONUNBUFFERED=1  # progress shows as it happens, also when the output goes to a file
cores=$(nproc)
hogs=$(( ${HOG_PER_CORE:-4} * cores ))

echo "load check: $hogs CPU hog processes on $cores cores; before: $(uptime)"
if command -v stress-ng >/dev/null 2>&1; then
    stress-ng --cpu "$hogs" --timeout 0 --quiet &
    hog=$!
    hog_kind="stress-ng --cpu $hogs"
else
    setsid "$PYTHON" -c '
import multiprocessing, sys
def burn():
    while True:
        pass
procs = [multiprocessing.Process(target=burn, daemon=True) for _ in range(int(sys.argv[1]))]
for p in procs:
    p.start()
for p in procs:
    p.join()
' "$hogs" &
    hog=$!
    hog_kind="$hogs Python busy loops"
fi
stop_hog() {
    # stress-ng stops its workers on SIGTERM; the Python burner is its own process group.
    kill -TERM "$hog" 2>/dev/null || true
    kill -TERM -- "-$hog" 2>/dev/null || true
    wait "$hog" 2>/dev/null || true
}
trap stop_hog EXIT
trap 'exit 130' INT TERM  # stop here (the EXIT trap stops the hog), not at the next run
sleep 20  # let the load average climb before the tests start
echo "hog: $hog_kind; load now: $(uptime)"

status=0
started=$(date +%s)
"$PYTHON" -m pytest -m process --durations=15 "$@" || status=1
echo "process suite: exit $status after $(( $(date +%s) - started )) s; load: $(uptime)"

started=$(date +%s)
"$PYTHON" -m pytest tests/faults -m "not process" --durations=10 "$@" || status=1
echo "faults suite: exit $status after $(( $(date +%s) - started )) s; load: $(uptime)"

stop_hog
trap - EXIT
echo "after: $(uptime)"
exit "$status"
