# username_password_vpn: the OpenVPN client as tun0, from /etc/egress/openvpn.conf (built by the worker from the
# gateway's checked config), openvpn-ca.pem, openvpn.auth (0600: username and password lines) and openvpn-tls.key
# (0600, optional). The remote is the endpoint's resolved address (the one the kill switch lets through). Up from
# OpenVPN's route-up until its down (openvpn-event writes $RUN/openvpn.state). Sourced by egress-sidecar.
for f in openvpn.conf openvpn-ca.pem openvpn.auth; do [ -r "$CONF/$f" ] || fail "no $CONF/$f"; done
ovpn_pid=''

tunnel_start() {
  : >"$RUN/openvpn.log"
  echo down >"$RUN/openvpn.state"
  ip route replace "$ep_ip/32" $ep_route || true
  openvpn --config "$CONF/openvpn.conf" --remote "$ep_ip" "$ep_port" --dev tun0 --dev-type tun --disable-dco \
    --script-security 2 --route-up "$LIB/openvpn-event up" --down "$LIB/openvpn-event down" \
    --log "$RUN/openvpn.log" &
  ovpn_pid=$!
}

tunnel_state() {
  kill -0 "$ovpn_pid" 2>/dev/null || { echo dead; return; }
  local state
  state=$(cat "$RUN/openvpn.state" 2>/dev/null || echo down)
  # A server whose certificate fails the gateway's CA only makes OpenVPN retry: end it, tunnel_failure says why.
  if [ "$state" != up ] && grep -qE 'VERIFY ERROR|certificate verify failed' "$RUN/openvpn.log"; then
    kill "$ovpn_pid" 2>/dev/null; echo dead; return
  fi
  echo "$state"
}

tunnel_failure() {
  tail -n 30 "$RUN/openvpn.log" >&2
  if grep -q 'AUTH_FAILED' "$RUN/openvpn.log"; then echo "authentication refused (the gateway rejected the username or password)"
  elif grep -q 'Options error' "$RUN/openvpn.log"; then echo "bad configuration: $(grep -m1 'Options error' "$RUN/openvpn.log" | sed 's/.*Options error: //')"
  elif grep -qE 'VERIFY ERROR|certificate verify failed' "$RUN/openvpn.log"; then echo "the server's certificate does not match the gateway's CA"
  else echo "openvpn exited: $(tail -n 1 "$RUN/openvpn.log" | cut -c1-200)"
  fi
}
