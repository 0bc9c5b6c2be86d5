# Starting, checking and stopping the harness's processes. Sourced by `up` and `down`.
# Each process runs in its own session (setsid) with its pid in $STATE_DIR/pids/NAME.pid, so `down`
# stops exactly what `up` started and nothing else.

# start_process NAME COMMAND...  (stdin closed, output to $STATE_DIR/logs/NAME.log)
start_process() {
  local name=$1; shift
  mkdir -p "$STATE_DIR/pids" "$STATE_DIR/logs"
  setsid "$@" </dev/null >"$STATE_DIR/logs/$name.log" 2>&1 &
  echo $! >"$STATE_DIR/pids/$name.pid"
}

# pid_running PID: true while PID runs. A zombie (exited, not yet reaped: this machine's init
# reaps late) counts as stopped, which `kill -0` alone would not tell.
pid_running() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z* ]]
}

process_alive() {
  local pidfile="$STATE_DIR/pids/$1.pid"
  [[ -f "$pidfile" ]] && pid_running "$(cat "$pidfile")"
}

# wait_until NAME SECONDS COMMAND...: polls COMMAND every 0.2 s; fails naming NAME's log on timeout
# or when the process has died.
wait_until() {
  local name=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if ! process_alive "$name"; then
      tail -n 30 "$STATE_DIR/logs/$name.log" >&2 || true
      die "$name exited during startup (log: $STATE_DIR/logs/$name.log)"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 30 "$STATE_DIR/logs/$name.log" >&2 || true
      die "$name not ready after ${seconds}s (log: $STATE_DIR/logs/$name.log)"
    fi
    sleep 0.2
  done
}

# stop_process NAME: SIGTERM to the process's session, SIGKILL after 10 s. Fails if it survives.
stop_process() {
  local name=$1 pidfile="$STATE_DIR/pids/$1.pid" pid
  [[ -f "$pidfile" ]] || return 0
  pid=$(cat "$pidfile")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  local i
  for ((i = 0; i < 100; i++)); do
    pid_running "$pid" || break
    sleep 0.1
  done
  if pid_running "$pid"; then
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
      pid_running "$pid" || break
      sleep 0.1
    done
  fi
  if pid_running "$pid"; then
    echo "[cluster] error: $name (pid $pid) survived SIGKILL" >&2
    return 1
  fi
  rm -f "$pidfile"
}

# free_ports N: prints N distinct free loopback TCP ports.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}
