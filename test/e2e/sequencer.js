/**
 * The order the e2e files start in when they run several at a time (scripts/test.sh): the longest first, so no
 * long file starts last and leaves the other workers idle at the end. Jest's own sequencer orders by the durations
 * it cached on this checkout and falls back to file size, which on a fresh clone puts, e.g., the egress tunnel
 * suite (short file, about 3.5 minutes: WireGuard's 180 s dead-session rule) near the end. The seconds below were
 * measured with two files at a time on the 2-core machine; they only order the files, so a stale figure costs a
 * little time, never a result. A file not listed counts as 20 s.
 */
const { basename } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const SECONDS = {
  'egress-tunnel': 208, 'persistent-profiles': 177, 'staging-pool': 159, 'session-recordings': 146, 'egress-openvpn': 100,
  'image-launch-settings': 90, 'server-sessions': 88, 'launch-cleanup': 84, 'host-health': 80, 'cast-browser': 74,
  'workspace-events': 70, 'browser-client': 69, workspaces: 61, 'stream-enforcement': 61, fuzz: 57, casting: 55,
  'workspace-files-attacks': 55, webhooks: 50, 'api-replicas': 48, 'recording-capture': 45, 'audio-auth': 41, storage: 40,
  'recording-decoder': 38, 'egress-nebula': 37, 'server-targets-ssrf': 30, 'workspace-isolation': 29, 'egress-launch': 29,
  'browser-image': 27, audio: 27,
};
const DEFAULT_SECONDS = 20;

/** Jest's option is global: unit runs keep jest's own order. */
class LongestFirst extends Sequencer {
  sort(tests) {
    if (!tests.every((test) => /\.e2e-spec\.ts$/.test(test.path))) return super.sort(tests);
    const seconds = (test) => SECONDS[basename(test.path).replace(/\.e2e-spec\.ts$/, '')] ?? DEFAULT_SECONDS;
    return [...tests].sort((a, b) => seconds(b) - seconds(a) || a.path.localeCompare(b.path));
  }
}

module.exports = LongestFirst;
