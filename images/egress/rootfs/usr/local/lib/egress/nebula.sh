# mesh_network: nebula (1.6) as nebula1, from /etc/egress/nebula.yml (built by the worker from the gateway's checked
# config: the gateway node is the lighthouse and the exit, unsafe routes 0.0.0.0/1 + 128.0.0.0/1 through it),
# nebula-ca.crt, nebula-host.crt and nebula-host.key (0600). Nebula has no status command: its log says it. Up
# while the last word about the exit node is a completed handshake (not "Tunnel status" dead, nor a close).
# Sourced by egress-sidecar.
for f in nebula.yml nebula-ca.crt nebula-host.crt nebula-host.key; do [ -r "$CONF/$f" ] || fail "no $CONF/$f"; done
EXIT_NODE=${TUNNEL[EXIT_NODE]:-}
[ -n "$EXIT_NODE" ] || fail "tunnel.env needs EXIT_NODE"
nebula_pid=''

tunnel_start() {
  : >"$RUN/nebula.log"
  ip route replace "$ep_ip/32" $ep_route || true
  nebula -config "$CONF/nebula.yml" >>"$RUN/nebula.log" 2>&1 &
  nebula_pid=$!
}

tunnel_state() {
  kill -0 "$nebula_pid" 2>/dev/null || { echo dead; return; }
  local last
  last=$(grep -E 'Handshake message received|Tunnel status|Close tunnel received' "$RUN/nebula.log" | grep -E "vpnIp=${EXIT_NODE//./\\.}( |\$)" | tail -n 1)
  case "$last" in *'Handshake message received'*) echo up ;; *) echo down ;; esac
}

tunnel_failure() {
  tail -n 20 "$RUN/nebula.log" >&2
  if grep -q 'not a pair with public key' "$RUN/nebula.log"; then echo "bad configuration: the mesh key does not match the node's certificate"
  elif grep -qiE 'expired|not valid|verif|validat' "$RUN/nebula.log"; then echo "the node's certificate is not valid for the mesh's CA: $(grep -m1 -iE 'expired|not valid|verif|validat' "$RUN/nebula.log" | sed 's/.*error=//' | cut -c1-200)"
  else echo "nebula exited: $(tail -n 1 "$RUN/nebula.log" | sed 's/^time="[^"]*" //' | cut -c1-200)"
  fi
}
