# custom: runs the gateway's command (/etc/egress/command: its path and arguments, NUL-separated) with the
# credential on standard input (/etc/egress/credential, 0600: one line of JSON) and an environment without secrets.
# The command brings up $DEV; the tunnel is up while $DEV is up. Sourced by egress-sidecar.
[ -r "$CONF/command" ] && [ -r "$CONF/credential" ] || fail "no $CONF/command or $CONF/credential"
mapfile -d '' -t custom_cmd <"$CONF/command"
[ "${#custom_cmd[@]}" -gt 0 ] || fail "bad configuration: the command is empty"
[ -x "${custom_cmd[0]}" ] || fail "bad configuration: ${custom_cmd[0]} is not a program of the sidecar image"
custom_pid=''

tunnel_start() {
  ip route replace "$ep_ip/32" $ep_route || true
  rm -f "$RUN/custom.rc"
  {
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin EGRESS_ENDPOINT="$ENDPOINT" \
      EGRESS_ENDPOINT_ADDRESS="$ep_ip" EGRESS_DEV="$DEV" "${custom_cmd[@]}" <"$CONF/credential" >&2
    echo $? >"$RUN/custom.rc"
  } &
  custom_pid=$!
}

tunnel_state() {
  kill -0 "$custom_pid" 2>/dev/null || { echo dead; return; }
  if ip link show dev "$DEV" up 2>/dev/null | grep -q .; then echo up; else echo down; fi
}

tunnel_failure() {
  echo "the command ${custom_cmd[0]} exited (code $(cat "$RUN/custom.rc" 2>/dev/null || echo '?'))"
}
