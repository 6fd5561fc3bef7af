/**
 * How npm test (scripts/test.sh) groups the e2e files; jest.config.js turns WS_E2E_GROUP into a group's files:
 * early (while the images build), shared (every other file, several at a time), then the alone lanes side by side.
 */

/**
 * e2e suites that must have the machine to themselves when suites run several at a time (scripts/test.sh): they start a
 * second dockerd with bridges of its own, a whole compose stack, or measure recovery from faults they inject on
 * timers that a neighbour's load would stretch. They run after the others in two lanes side by side, one suite per
 * lane at a time: the two that inject faults in one lane (never beside each other), the hosts' suites in the other.
 */
const E2E_ALONE_LANES = {
  'alone-faults': ['worker-faults', 'dependency-faults'],
  'alone-hosts': ['worker-pool', 'host-health', 'two-engines', 'compose'],
};
/**
 * e2e suites that use none of the images npm test builds (only the host's engine, chromium, PostgreSQL and Redis):
 * they run while the images are still building. test/structure/e2e-groups.spec.ts checks that none reaches for an
 * image, and the harness refuses to build one in this group.
 */
const E2E_EARLY = [
  'auth-rate-limit', 'cli', 'egress', 'hydration', 'licensing', 'logs', 'openapi', 'pagination',
  'permission-matrix', 'queue-dashboard', 'recording-browser', 'session-tokens', 'staging', 'storage-put-file', 'storage',
  'stream-rfb', 'users', 'worker-readiness', 'workspace-owner', 'zones',
];

module.exports = { E2E_ALONE_LANES, E2E_EARLY };
