#!/usr/bin/env node
// The npm registry reachable here serves no macOS/Windows builds of platform-specific optional packages
// (@swc/core-darwin-arm64 …), so `npm install` leaves them out of package-lock.json and `npm ci` then refuses
// the lock as out of sync. This records each missing one with its os/cpu, which is all npm ci needs: it
// skips packages of other platforms without fetching them. Run after changing dependencies:
//   npm install && node scripts/lockfile-foreign-platforms.js
const fs = require('node:fs');
const path = require('node:path');

const lockPath = path.join(__dirname, '..', 'package-lock.json');
const lock = JSON.parse(fs.readFileSync(lockPath, 'utf8'));
const OS = { darwin: 'darwin', linux: 'linux', win32: 'win32', freebsd: 'freebsd', android: 'android' };
const CPU = ['arm64', 'x64', 'ia32', 'arm', 'ppc64', 's390x', 'riscv64', 'loong64'];

function platformOf(name) {
  const parts = name.split('/').pop().split('-');
  const os = parts.find((p) => OS[p]);
  const cpu = parts.find((p) => CPU.includes(p));
  return os && cpu ? { os: [os], cpu: [cpu] } : null;
}

let added = 0;
for (const [where, entry] of Object.entries(lock.packages)) {
  for (const [dep, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const base = where === '' ? 'node_modules' : `${where}/node_modules`;
    if (lock.packages[`${base}/${dep}`] || lock.packages[`node_modules/${dep}`]) continue;
    const platform = platformOf(dep);
    if (!platform) throw new Error(`${dep} (optional dependency of ${where}) is missing from the lock and names no platform`);
    lock.packages[`node_modules/${dep}`] = { version, ...platform, optional: true, ...(entry.dev ? { dev: true } : {}) };
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
fs.writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`package-lock.json: recorded ${added} optional package(s) of other platforms`);
