#!/usr/bin/env bash
# Host firewall that isolates workspace containers (run as root on every Docker host that runs workspaces;
# ensure-docker.sh runs it for the local engine). Idempotent; replaces its own chains atomically.
#
# Workspaces live on one bridge network, `workspace-server-isolated`, whose Linux bridge is named
# `ws-isolated` (libs/agent/src/workspace-network.ts). Rules match that interface name, so they hold before
# the network exists and survive its re-creation. For connections a workspace OPENS (replies to connections
# made to it, e.g. its published VNC port, still pass):
#   - to the host itself on any address (bridge gateway, 0.0.0.0 listeners, other interfaces): refused
#   - to another container on the same bridge (needs br_netfilter: bridged frames pass iptables): refused
#   - forwarded to other Docker bridges, private, shared (CGNAT) and link-local addresses (cloud metadata):
#     refused; public addresses stay reachable wherever the host routes and NATs them
#   - IPv6: refused entirely (workspace networks have no IPv6)
# Docker's own `--iptables=true` (a normal host) does not stop a container from reaching its host, so these
# rules are needed there too; its enable_icc=false only covers the same bridge.
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"

# A second engine on the same machine (its own network namespace is shared) names its isolated bridge otherwise:
# the agent reads the engine label workspace-server.isolated-bridge; pass the same name here (chains get a suffix).
BRIDGE="${WS_ISOLATED_BRIDGE:-ws-isolated}"
[[ "$BRIDGE" =~ ^[a-zA-Z0-9_.-]{1,15}$ ]] || die "WS_ISOLATED_BRIDGE must be a Linux interface name (got $BRIDGE)"
IN_CHAIN=WS-ISOLATION-IN
FWD_CHAIN=WS-ISOLATION-FWD
if [ "$BRIDGE" != ws-isolated ]; then IN_CHAIN="WS-ISO-IN-$BRIDGE"; FWD_CHAIN="WS-ISO-FWD-$BRIDGE"; fi  # ≤ 28 characters
REJECT4=(-j REJECT --reject-with icmp-admin-prohibited)
REJECT6=(-j REJECT --reject-with icmp6-adm-prohibited)
BLOCKED_V4_NETS=(10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 100.64.0.0/10 169.254.0.0/16 127.0.0.0/8)

have iptables-restore && have ip6tables-restore || apt_install iptables
with_lock firewall 60

# Bridged traffic between two workspaces never reaches IP routing; br_netfilter hands it to iptables.
if [ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
  have modprobe || apt_install kmod
  as_root modprobe br_netfilter || die "cannot load br_netfilter: workspaces on one bridge could reach each other"
fi
as_root sysctl -q -w net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1 >/dev/null \
  || die "cannot enable net.bridge.bridge-nf-call-iptables"

v4_rules() {
  printf '*filter\n:%s - [0:0]\n:%s - [0:0]\n' "$IN_CHAIN" "$FWD_CHAIN"
  printf -- '-A %s -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN\n' "$IN_CHAIN"
  printf -- '-A %s %s\n' "$IN_CHAIN" "${REJECT4[*]}"
  printf -- '-A %s -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN\n' "$FWD_CHAIN"
  printf -- '-A %s -o %s %s\n' "$FWD_CHAIN" "$BRIDGE" "${REJECT4[*]}"
  printf -- '-A %s -o docker0 %s\n' "$FWD_CHAIN" "${REJECT4[*]}"
  printf -- '-A %s -o br-+ %s\n' "$FWD_CHAIN" "${REJECT4[*]}"
  local net
  for net in "${BLOCKED_V4_NETS[@]}"; do printf -- '-A %s -d %s %s\n' "$FWD_CHAIN" "$net" "${REJECT4[*]}"; done
  printf 'COMMIT\n'
}

v6_rules() {
  printf '*filter\n:%s - [0:0]\n:%s - [0:0]\n' "$IN_CHAIN" "$FWD_CHAIN"
  local chain
  for chain in "$IN_CHAIN" "$FWD_CHAIN"; do
    printf -- '-A %s -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN\n' "$chain"
    printf -- '-A %s %s\n' "$chain" "${REJECT6[*]}"
  done
  printf 'COMMIT\n'
}

# Jumps to our chains, first in INPUT and in DOCKER-USER (which Docker evaluates before its own accept rules
# and never flushes) or else FORWARD.
hook() {
  local cmd="$1" parent="$2" chain="$3"
  as_root "$cmd" -C "$parent" -i "$BRIDGE" -j "$chain" 2>/dev/null || as_root "$cmd" -I "$parent" 1 -i "$BRIDGE" -j "$chain"
}

install_family() {
  local cmd="$1" rules="$2" forward=FORWARD
  # --noflush: only our two chains are (re)declared, and so emptied and refilled in one transaction.
  "$rules" | as_root "$cmd-restore" --noflush || die "$cmd-restore failed: cannot install the workspace firewall"
  hook "$cmd" INPUT "$IN_CHAIN"
  as_root "$cmd" -n -L DOCKER-USER >/dev/null 2>&1 && forward=DOCKER-USER
  hook "$cmd" "$forward" "$FWD_CHAIN"
}

install_family iptables v4_rules
install_family ip6tables v6_rules
log "workspace firewall installed (bridge $BRIDGE: no connections to the host, other workspaces or private networks)"
