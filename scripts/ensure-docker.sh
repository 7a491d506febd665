#!/usr/bin/env bash
# Makes sure a Docker daemon answers `docker info`, from nothing if need be. Idempotent.
#
#   1. `docker info` works                 -> nothing to do.
#   2. docker/dockerd missing (root only)  -> apt-get install Debian's docker.io (no registry, Debian's mirror only).
#   3. daemon not answering (root only)    -> `systemctl start docker` where systemd runs, else `dockerd` in the
#                                             background, logging to $ASSAY_DOCKERD_LOG; then wait, bounded.
# Prints one line per thing it did; exits non-zero with a message saying what failed and what to do.
#
# Environment (all optional):
#   ASSAY_DOCKERD_LOG      dockerd log file            (default /var/log/assay-dockerd.log)
#   ASSAY_DOCKERD_TIMEOUT  seconds to wait for dockerd (default 60)
#   ASSAY_DOCKER_START     auto | systemd | direct     (default auto: systemd when it is PID 1's init)
#   ASSAY_DOCKERD_PIDFILE  dockerd's pid file          (default /var/run/docker.pid)
#   ASSAY_DOCKERD_INSTALL_GRACE  seconds to wait after installing for a daemon the package started (default 5)
#   ASSAY_ENSURE_DOCKER_PATH  replaces PATH (tests use it to substitute stubs for docker, dockerd, apt-get, id)
set -euo pipefail

# Root's daemons live in sbin, which a non-login PATH may lack.
export PATH="${ASSAY_ENSURE_DOCKER_PATH:-$PATH:/usr/local/sbin:/usr/sbin:/sbin}"
LOG="${ASSAY_DOCKERD_LOG:-/var/log/assay-dockerd.log}"
TIMEOUT="${ASSAY_DOCKERD_TIMEOUT:-60}"
START_MODE="${ASSAY_DOCKER_START:-auto}"
PIDFILE="${ASSAY_DOCKERD_PIDFILE:-/var/run/docker.pid}"
INSTALL_GRACE="${ASSAY_DOCKERD_INSTALL_GRACE:-5}"

say() { printf 'ensure-docker: %s\n' "$*"; }
die() {
  printf 'ensure-docker: error: %s\n' "$*" >&2
  exit 1
}

case "$TIMEOUT" in '' | *[!0-9]*) die "ASSAY_DOCKERD_TIMEOUT must be a whole number of seconds, got '$TIMEOUT'" ;; esac
case "$INSTALL_GRACE" in '' | *[!0-9]*) die "ASSAY_DOCKERD_INSTALL_GRACE must be a whole number of seconds, got '$INSTALL_GRACE'" ;; esac
case "$START_MODE" in auto | systemd | direct) ;; *) die "ASSAY_DOCKER_START must be auto, systemd or direct, got '$START_MODE'" ;; esac

is_root() { [ "$(id -u)" = "0" ]; }
have() { command -v "$1" >/dev/null 2>&1; }
daemon_up() { have docker && docker info >/dev/null 2>&1; }
server_version() { docker version --format '{{.Server.Version}}' 2>/dev/null || echo unknown; }

if daemon_up; then
  say "docker daemon already running (server $(server_version)); nothing to do"
  exit 0
fi

# --- 2. install ------------------------------------------------------------------------------------------------
if ! have dockerd || ! have docker; then
  missing=""
  have docker || missing="docker"
  have dockerd || missing="${missing:+$missing and }dockerd"
  is_root || die "$missing not installed; run this script as root to install Debian's docker.io (apt-get install docker.io)"
  have apt-get || die "$missing not installed and apt-get is not available; install Docker by hand"
  extra=""
  # dockerd needs apparmor_parser where the kernel enforces AppArmor, and mounted cgroups where nothing mounted them.
  if [ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null || true)" = "Y" ]; then extra="$extra apparmor"; fi
  extra="$extra cgroupfs-mount"
  say "$missing not found: installing Debian's docker.io$extra with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  aptlog="$(mktemp "${TMPDIR:-/tmp}/ensure-docker-apt.XXXXXX")"
  if ! apt-get update -q >"$aptlog" 2>&1; then
    tail -n 20 "$aptlog" >&2 || true
    die "apt-get update failed (output above, full log $aptlog); check the Debian mirror in /etc/apt/sources.list(.d)"
  fi
  # shellcheck disable=SC2086 # $extra is a list of package names
  if ! apt-get install -y -q --no-install-recommends docker.io $extra >>"$aptlog" 2>&1; then
    tail -n 20 "$aptlog" >&2 || true
    die "apt-get install docker.io failed (output above, full log $aptlog)"
  fi
  rm -f "$aptlog"
  hash -r
  if ! have dockerd || ! have docker; then die "docker.io installed but docker/dockerd still not on PATH ($PATH)"; fi
  say "installed docker.io (dockerd: $(command -v dockerd))"
  # The package's own scripts may have started the daemon (systemd, or the sysv init script): give it a moment and
  # never start a second one while it writes its pid file.
  grace=0
  while [ "$grace" -lt "$INSTALL_GRACE" ]; do
    grace=$((grace + 1))
    if daemon_up; then
      say "docker daemon running after install (server $(server_version))"
      exit 0
    fi
    [ -s "$PIDFILE" ] && break
    sleep 1
  done
fi

# --- 3. start ----------------------------------------------------------------------------------------------------
is_root || die "the docker daemon is not answering and only root can start it; run this script as root, or start dockerd"

wait_ready() { # $1 = pid to watch (empty for systemd); returns 0 when ready, 1 when the process died, 2 on timeout
  local pid="$1" waited=0
  while [ "$waited" -lt "$TIMEOUT" ]; do
    if daemon_up; then return 0; fi
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 1
    waited=$((waited + 1))
  done
  if daemon_up; then return 0; fi
  return 2
}

use_systemd=false
if [ "$START_MODE" = systemd ] || { [ "$START_MODE" = auto ] && [ -d /run/systemd/system ] && have systemctl; }; then
  use_systemd=true
fi

if $use_systemd; then
  say "starting docker with systemctl"
  systemctl start docker || die "systemctl start docker failed; see 'journalctl -u docker'"
  if wait_ready ""; then
    say "docker daemon ready (server $(server_version))"
    exit 0
  fi
  die "docker did not answer within ${TIMEOUT}s after systemctl start; see 'journalctl -u docker'"
fi

# A daemon that is already starting (or hung) owns the pid file: wait for it instead of starting a second one.
if [ -s "$PIDFILE" ]; then
  oldpid="$(tr -dc '0-9' <"$PIDFILE" || true)"
  if [ -n "$oldpid" ] && kill -0 "$oldpid" 2>/dev/null; then
    say "dockerd already running as pid $oldpid but not answering yet; waiting up to ${TIMEOUT}s"
    if wait_ready "$oldpid"; then
      say "docker daemon ready (server $(server_version))"
      exit 0
    fi
    die "dockerd (pid $oldpid) is running but 'docker info' still fails after ${TIMEOUT}s; stop it or read its log"
  fi
  say "removing stale pid file $PIDFILE (pid ${oldpid:-?} is gone)"
  rm -f "$PIDFILE"
fi

# Containers in minimal systems may come without mounted cgroups; cgroupfs-mount (from Debian) mounts them.
if ! grep -qs ' /sys/fs/cgroup' /proc/mounts && have cgroupfs-mount; then
  say "mounting cgroups with cgroupfs-mount"
  cgroupfs-mount || say "cgroupfs-mount failed; dockerd may still manage"
fi

mkdir -p "$(dirname "$LOG")" || die "cannot create the directory of the log file $LOG"
printf '\n--- %s ensure-docker starting dockerd ---\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$LOG" ||
  die "cannot write the log file $LOG (set ASSAY_DOCKERD_LOG)"
say "starting dockerd in the background (log: $LOG)"
# setsid + nohup: the daemon outlives this script and its terminal. With -w, setsid either becomes dockerd or waits
# for it, so $! is alive exactly as long as dockerd is.
if have setsid; then
  setsid -w nohup dockerd >>"$LOG" 2>&1 </dev/null &
else
  nohup dockerd >>"$LOG" 2>&1 </dev/null &
fi
pid=$!

set +e
wait_ready "$pid"
status=$?
set -e
case "$status" in
  0)
    say "docker daemon ready (pid $pid, server $(server_version))"
    exit 0
    ;;
  1)
    printf 'ensure-docker: last lines of %s:\n' "$LOG" >&2
    tail -n 20 "$LOG" >&2 || true
    die "dockerd exited before it was ready (see $LOG)"
    ;;
  *)
    printf 'ensure-docker: last lines of %s:\n' "$LOG" >&2
    tail -n 20 "$LOG" >&2 || true
    die "dockerd (pid $pid) did not answer within ${TIMEOUT}s (see $LOG); it is left running"
    ;;
esac
