#!/usr/bin/env node
// The last step of `npm test` (issue 23): no secret the e2e suites used appears in any log line they caused.
// test/e2e/harness.ts wrote, per suite, <dir>/<suite>.log (the JSON lines of its in-process api and worker, and
// its child processes' output) and <dir>/<suite>.secrets (one JSON string a line: api key secrets, passwords,
// session JWTs it made or saw). Every secret of the run is looked for in every log of the run.
// Usage: node scripts/check-log-secrets.js <dir>
'use strict';
const { readdirSync, readFileSync } = require('node:fs');
const { join } = require('node:path');

const dir = process.argv[2];
if (!dir) {
  console.error('usage: check-log-secrets.js <log directory of an e2e run>');
  process.exit(2);
}
const files = readdirSync(dir);
const secrets = new Map(); // secret -> suite that recorded it
for (const name of files.filter((f) => f.endsWith('.secrets'))) {
  for (const line of readFileSync(join(dir, name), 'utf8').split('\n')) {
    if (line.trim()) secrets.set(JSON.parse(line), name.replace(/\.secrets$/, ''));
  }
}
const logs = files.filter((f) => f.endsWith('.log'));
let bytes = 0;
const found = [];
for (const name of logs) {
  const text = readFileSync(join(dir, name), 'utf8');
  bytes += text.length;
  for (const [secret, suite] of secrets) {
    const at = text.indexOf(secret);
    if (at >= 0) {
      const lineStart = text.lastIndexOf('\n', at) + 1;
      const lineEnd = text.indexOf('\n', at);
      found.push({ log: name, suite, line: text.slice(lineStart, lineEnd < 0 ? undefined : lineEnd).replace(secret, '<SECRET>').slice(0, 400) });
    }
  }
}
console.log(`[log-secrets] ${secrets.size} secrets of ${files.filter((f) => f.endsWith('.secrets')).length} suites looked for in ${logs.length} logs (${(bytes / 1e6).toFixed(1)} MB)`);
if (found.length) {
  for (const f of found) console.error(`[log-secrets] a secret of ${f.suite} is in ${f.log}: ${f.line}`);
  process.exit(1);
}
console.log('[log-secrets] none found');
