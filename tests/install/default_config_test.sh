#!/bin/bash
# default_config_test.sh SERVER CONFIG
# The shipped /etc/wormhole/server.toml (dist/server.toml): every option of
# `wormhole-server --help` has its key there, each commented key shows the
# default --help gives (the socket's as under the systemd unit, with
# WORMHOLE_SOCKET=/run/wormhole/server.sock), and the file with every
# commented key uncommented (their defaults) is accepted by the server,
# which then starts. The VM, metrics and network (listen, auth_key_file) examples and the socket's group (the package's
# system group) are left out of the second check.
set -euo pipefail
server=$1
conf=$2
fail() { echo "default_config_test: FAIL: $*" >&2; exit 1; }
missing=""
for o in $("$server" --help | grep -oE '^[[:space:]]+--[a-z][a-z-]*' | tr -d ' ' | sort -u); do
  case "$o" in --help|--version|--config) continue ;; esac
  key=${o#--}; key=${key//-/_}
  grep -qE "^#?${key} = " "$conf" || missing="$missing $key"
done
[ -z "$missing" ] || fail "keys missing from $conf:$missing"
wrong=""
while read -r opt def; do
  key=${opt#--}; key=${key//-/_}
  line=$(grep -E "^#${key} = " "$conf" || true)
  [ -n "$line" ] || continue
  val=${line#*= }; val=${val%\"}; val=${val#\"}
  [ "$val" = "$def" ] || wrong="$wrong $key($val, default $def)"
done < <(WORMHOLE_SOCKET=/run/wormhole/server.sock "$server" --help |
         sed -nE 's/^[[:space:]]+(--[a-z][a-z-]*) [^=]*=([^ []+)( .*)?$/\1 \2/p')
[ -z "$wrong" ] || fail "commented keys not at the server's default:$wrong"
work=$(mktemp -d)
spid=""
trap '[ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null; rm -rf "$work"' EXIT
sed -nE 's/^#?([a-z_]+ = )/\1/p' "$conf" | grep -vE '^(vm|vm_gate|socket_group|uid_quota_mb|admin_socket|admin_socket_group|metrics|listen|auth_key_file) = ' >"$work/all.toml"
echo "default_config_test: $(wc -l <"$work/all.toml") keys at their defaults"
"$server" --config "$work/all.toml" --backend sim --socket "$work/s.sock" --sim-memory-mb 64 >"$work/log" 2>&1 &
spid=$!
for _ in $(seq 1 100); do
  [ -S "$work/s.sock" ] && break
  kill -0 "$spid" 2>/dev/null || { cat "$work/log" >&2; fail "the server refused $conf's defaults"; }
  sleep 0.05
done
[ -S "$work/s.sock" ] || fail "no socket"
[ "$(stat -c %a "$work/s.sock")" = 660 ] || fail "socket_mode not applied"
kill -TERM "$spid"; wait "$spid"; spid=""
echo "default_config_test: PASS"
