#!/usr/bin/env node
// A real S3-compatible server on loopback for tests and local use of s3:// storage: s3rver (npm
// @20minutes/s3rver, a dev dependency), which verifies SigV4 header signatures and presigned-url signatures and
// expiry, and implements multipart uploads, ranges, metadata and ListObjectsV2. Credentials: S3RVER / S3RVER.
//   node scripts/s3-server.js --dir DIR [--bucket NAME]... [--port N] [--stop-on-stdin-close yes]   (port 0: a free one)
// Prints "listening http://127.0.0.1:<port>" once it serves; stops on SIGTERM/SIGINT, and with
// --stop-on-stdin-close when its parent's end of stdin closes (so a killed test run leaves no server behind).
'use strict';
const { mkdirSync } = require('node:fs');
const S3rver = require('@20minutes/s3rver');

function parseArgs(argv) {
  const args = { dir: '', buckets: [], port: 0, stopOnStdinClose: false };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--dir') args.dir = value;
    else if (flag === '--bucket') args.buckets.push(value);
    else if (flag === '--port') args.port = Number(value);
    else if (flag === '--stop-on-stdin-close') args.stopOnStdinClose = value === 'yes';
    else throw new Error(`unknown option ${flag}`);
  }
  if (!args.dir) throw new Error('--dir is required');
  if (!Number.isInteger(args.port) || args.port < 0 || args.port > 65535) throw new Error('--port must be 0-65535');
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  mkdirSync(args.dir, { recursive: true });
  const server = new S3rver({
    address: '127.0.0.1', // loopback only
    port: args.port,
    directory: args.dir,
    silent: true,
    vhostBuckets: false, // path-style, as S3_FORCE_PATH_STYLE=true addresses it
    configureBuckets: args.buckets.map((name) => ({ name })),
  });
  const address = await server.run();
  process.stdout.write(`listening http://127.0.0.1:${address.port}\n`);
  const stop = () => server.close().then(() => process.exit(0), () => process.exit(1));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  if (args.stopOnStdinClose) {
    process.stdin.once('end', stop).once('error', stop);
    process.stdin.resume();
  }
}

main().catch((err) => {
  process.stderr.write(`[s3-server] ${err.stack || err}\n`);
  process.exit(1);
});
