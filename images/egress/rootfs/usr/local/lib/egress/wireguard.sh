# key_pair_tunnel: wireguard-go (user space) as wg0, from /etc/egress/wg0.conf (`wg setconf` format, 0600: the
# private key, the gateway's public key, endpoint, allowed IPs, keepalive) and tunnel.env's ADDRESS, ALLOWED_IPS,
# MTU. Up while the latest handshake is under 180 s old. Sourced by egress-sidecar.
ADDRESS=${TUNNEL[ADDRESS]:-} ALLOWED_IPS=${TUNNEL[ALLOWED_IPS]:-} MTU=${TUNNEL[MTU]:-1420}
[ -r "$CONF/wg0.conf" ] || fail "no $CONF/wg0.conf"
[ -n "$ADDRESS" ] && [ -n "$ALLOWED_IPS" ] || fail "tunnel.env needs ADDRESS and ALLOWED_IPS"
wg_pid=''

tunnel_start() {
  ip link del wg0 2>/dev/null
  WG_PROCESS_FOREGROUND=1 wireguard-go wg0 >&2 &
  wg_pid=$!
  # wireguard-go makes the interface first and opens its control socket (what `wg` talks to) a moment later: on a
  # busy host `wg setconf` in between fails as if the configuration were bad. Wait for both.
  for _ in $(seq 100); do [ -e /sys/class/net/wg0 ] && [ -S /var/run/wireguard/wg0.sock ] && break; sleep 0.1; done
  [ -e /sys/class/net/wg0 ] || { TUNNEL_ERROR="wireguard-go did not create wg0 (/dev/net/tun?)"; return 1; }
  [ -S /var/run/wireguard/wg0.sock ] || { TUNNEL_ERROR="wireguard-go did not open its control socket for wg0"; return 1; }
  wg setconf wg0 "$CONF/wg0.conf" || { TUNNEL_ERROR="bad WireGuard configuration"; return 2; }
  local a c
  for a in ${ADDRESS//,/ }; do ip address add "$a" dev wg0 || return 2; done
  ip link set dev wg0 mtu "$MTU" up || return 1
  ip route replace "$ep_ip/32" $ep_route || true
  for c in ${ALLOWED_IPS//,/ }; do
    case "$c" in
      0.0.0.0/0) ip -4 route replace default dev wg0 ;;
      ::/0) ip -6 route replace default dev wg0 2>/dev/null ;;
      *:*) ip -6 route replace "$c" dev wg0 2>/dev/null ;;
      *) ip -4 route replace "$c" dev wg0 ;;
    esac || return 2
  done
}

tunnel_state() {
  kill -0 "$wg_pid" 2>/dev/null || { echo dead; return; }
  local hs
  hs=$(wg show wg0 latest-handshakes 2>/dev/null | awk '{ print $2; exit }')
  if [ -n "$hs" ] && [ "$hs" -gt 0 ] && [ $(( $(date +%s) - hs )) -lt 180 ]; then echo up; else echo down; fi
}

# WireGuard cannot tell a refused key from silence: an exit is only ever retried.
tunnel_failure() { :; }
