/**
 * The order the e2e files start in when they run several at a time (scripts/test.sh): the longest first, so no
 * long file starts last and leaves the other workers idle at the end. Jest's own sequencer orders by the durations
 * it cached on this checkout and falls back to file size, which on a fresh clone puts, e.g., the egress tunnel
 * suite (short file, about 1.5 minutes: it stops and starts a VPN gateway) near the end. The seconds below were
 * measured with three files at a time on the 2-core machine (CI, 2026-11-29); they only order the files, so a stale
 * figure costs a little time, never a result. A file not listed counts as 4 s (jest printed no time: under 5 s).
 */
const { basename } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const SECONDS = {
  'egress-tunnel': 105, 'session-recordings': 91, 'persistent-profiles': 90, 'worker-faults': 88, 'staging-pool': 65,
  'egress-openvpn': 56, 'dependency-faults': 49, storage: 37, 'worker-pool': 36, workspaces: 35, 'two-engines': 34,
  'host-health': 34, compose: 32, 'launch-cleanup': 31, 'browser-image': 31, 'audio-auth': 30,
  'server-targets-ssrf': 28, 'egress-nebula': 28, 'image-launch-settings': 28, 'workspace-files-attacks': 27,
  'server-sessions': 27, 'recording-decoder': 24, 'cast-browser': 24, 'recording-browser': 22,
  'recording-capture': 21, webhooks: 20, 'workspace-isolation': 19, fuzz: 19, audio: 19, 'workspace-events': 17,
  casting: 17, 'egress-launch': 17, 'browser-client': 16, openapi: 16, 'stream-gateway': 11, pagination: 11,
  'audio-browser': 11, 'queue-dashboard': 10, 'stream-rfb': 10, 'api-replicas': 10, 'license-enforcement': 8,
  'files-browser': 8, 'workspace-files': 8, egress: 7, 'stream-enforcement': 7, 'placement-concurrency': 7,
  'stream-access': 7, metrics: 7, 'first-window': 6, idempotency: 6, 'client-first-content': 6, 'image-network': 5,
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
