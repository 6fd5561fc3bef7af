# key_pair_tunnel: wireguard-go (user space) as wg0, from /etc/egress/wg0.conf (`wg setconf` format, 0600: the
# private key, the gateway's public key, endpoint, allowed IPs, keepalive) and tunnel.env's ADDRESS, ALLOWED_IPS,
# MTU. Up while the latest handshake is under 180 s old and the gateway answered the liveness probe lately (below).
# Sourced by egress-sidecar.
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
  probe_ip=$(pick_probe_ip)
  rm -f "$RUN/wg-liveness"
  [ -n "$probe_ip" ] || log "no IPv4 address routes into wg0: the tunnel counts as up on its handshake alone"
}

# Liveness between handshakes. A WireGuard peer answers every data packet it decrypts with at least a keepalive
# within 10 s (passive keepalive, in the protocol), whatever the packet's inner destination. So one UDP datagram sent
# into the tunnel every PROBE_S seconds gets something back from a live gateway, and nothing received for SILENT_S
# seconds while probing means it is gone: a dropped gateway shows in ~25 s instead of when the session expires (180 s).
# The probe also restarts the handshake at once when the gateway returns. Its address only has to route into wg0.
PROBE_S=5 SILENT_S=25
probe_ip=''

# The first address the tunnel routes: the tunnel subnet's first host (usually the gateway), else the first allowed
# range's, else a documentation address (192.0.2.1, never a host) when everything goes through the tunnel.
pick_probe_ip() {
  local cidr addr p n c
  for cidr in $(tr ',' ' ' <<<"$ADDRESS $ALLOWED_IPS") 192.0.2.1/32; do
    [[ $cidr =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)(/([0-9]+))?$ ]] || continue
    p=${BASH_REMATCH[6]:-32}
    n=$(( (BASH_REMATCH[1] << 24) | (BASH_REMATCH[2] << 16) | (BASH_REMATCH[3] << 8) | BASH_REMATCH[4] ))
    [ "$p" -lt 31 ] && n=$(( (n & ~((1 << (32 - p)) - 1) & 0xffffffff) + 1 ))
    addr=$(( n >> 24 & 255 )).$(( n >> 16 & 255 )).$(( n >> 8 & 255 )).$(( n & 255 ))
    for c in ${ADDRESS//,/ }; do [ "${c%/*}" = "$addr" ] && continue 2; done
    ip -4 route get "$addr" 2>/dev/null | grep -q " dev wg0 " && { echo "$addr"; return; }
  done
}

tunnel_state() {
  kill -0 "$wg_pid" 2>/dev/null || { echo dead; return; }
  local now hs rx seen_rx=-1 seen_at=0 probed_at=0
  now=$(date +%s)
  # tunnel_state runs in a subshell each second: what it saw last is kept in a file.
  [ -r "$RUN/wg-liveness" ] && read -r seen_rx seen_at probed_at <"$RUN/wg-liveness"
  # The peer's latest handshake and bytes received, in one call (the dump's second line: the only peer).
  read -r hs rx < <(wg show wg0 dump 2>/dev/null | awk 'NR == 2 { print $5, $6; exit }')
  [ "${rx:-0}" != "$seen_rx" ] && { seen_rx=${rx:-0}; seen_at=$now; }
  if [ -n "$probe_ip" ] && [ $(( now - probed_at )) -ge $PROBE_S ]; then
    { printf 'workspace-server egress probe\n' >"/dev/udp/$probe_ip/9"; } 2>/dev/null
    probed_at=$now
  fi
  echo "$seen_rx $seen_at $probed_at" >"$RUN/wg-liveness"
  if [ -n "$hs" ] && [ "$hs" -gt 0 ] && [ $(( now - hs )) -lt 180 ] && { [ -z "$probe_ip" ] || [ $(( now - seen_at )) -lt $SILENT_S ]; }; then
    echo up
  else
    echo down
  fi
}

# WireGuard cannot tell a refused key from silence: an exit is only ever retried.
tunnel_failure() { :; }
