/**
 * The order the e2e files start in when they run several at a time (scripts/test.sh): the longest first, so no
 * long file starts last and leaves the other workers idle at the end. Jest's own sequencer orders by the durations
 * it cached on this checkout and falls back to file size, which on a fresh clone puts, e.g., the egress tunnel
 * suite (short file, about 1.5 minutes: it stops and starts a VPN gateway) near the end. The seconds below were
 * measured with two files at a time on the 2-core machine (CI, 2026-11-28); they only order the files, so a stale
 * figure costs a little time, never a result. A file not listed counts as 4 s (jest printed no time: under 5 s).
 */
const { basename } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const SECONDS = {
  'egress-tunnel': 87, 'session-recordings': 83, 'persistent-profiles': 71, 'staging-pool': 65, 'egress-openvpn': 57,
  workspaces: 43, 'launch-cleanup': 38, 'recording-decoder': 33, storage: 33, 'egress-nebula': 32,
  'image-launch-settings': 31, 'audio-auth': 30, 'browser-client': 28, 'server-targets-ssrf': 27, 'server-sessions': 23,
  fuzz: 23, webhooks: 21, 'workspace-files-attacks': 20, 'cast-browser': 20, 'recording-capture': 17, 'browser-image': 16,
  casting: 16, 'stream-enforcement': 15, 'workspace-events': 15, 'audio-browser': 15, audio: 15, 'recording-browser': 15,
  'egress-launch': 14, 'workspace-isolation': 14, 'api-replicas': 13, 'stream-gateway': 12, 'files-browser': 12,
  openapi: 10, 'placement-concurrency': 10, 'first-window': 10, 'license-enforcement': 10, metrics: 9, egress: 8,
  pagination: 8, 'queue-dashboard': 8, 'stream-rfb': 8, 'workspace-files': 8, idempotency: 7, 'image-network': 7,
  'stream-access': 7, 'auth-rate-limit': 7, logs: 6, 'permission-matrix': 6, 'agent-docker': 6, 'client-first-content': 6,
};
const DEFAULT_SECONDS = 4;

/** Jest's option is global: unit runs keep jest's own order. */
class LongestFirst extends Sequencer {
  sort(tests) {
    if (!tests.every((test) => /\.e2e-spec\.ts$/.test(test.path))) return super.sort(tests);
    const seconds = (test) => SECONDS[basename(test.path).replace(/\.e2e-spec\.ts$/, '')] ?? DEFAULT_SECONDS;
    return [...tests].sort((a, b) => seconds(b) - seconds(a) || a.path.localeCompare(b.path));
  }
}

module.exports = LongestFirst;
