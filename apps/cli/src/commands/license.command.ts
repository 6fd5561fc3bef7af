import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Command } from 'commander';
import { AppConfig, formatTimestamp } from '@ws/common';
import {
  Entitlements, featureSet, isLicenseFeature, issueLicenseKey, issuerKeyId, LICENSE_FEATURES, LicenseFeature, LicensingService,
  parseIssuerPrivateKey, publicKeyText, toLicenseResponse,
} from '@ws/licensing';
import { collect, int, print, service } from '../context';

/** An ISO date, or a span from now: 30d, 12h. */
function expiry(value: string): Date {
  const span = /^(\d+)([dh])$/.exec(value.trim());
  const date = span ? new Date(Date.now() + Number(span[1]) * (span[2] === 'd' ? 86_400_000 : 3_600_000)) : new Date(value);
  if (Number.isNaN(date.getTime())) throw new Error(`not a date or span (2027-12-31, 365d, 12h): ${value}`);
  return date;
}

function features(names: string[]): LicenseFeature[] {
  if (names.includes('all')) return [...LICENSE_FEATURES];
  for (const name of names) if (!isLicenseFeature(name)) throw new Error(`unknown feature ${name}; known: ${LICENSE_FEATURES.join(', ')}, all`);
  return names as LicenseFeature[];
}

export function registerLicenseCommands(program: Command): void {
  const license = program.command('license').description('licenses: run an issuer (keygen, issue), apply and inspect (activate, show, list, remove)');

  license
    .command('keygen')
    .description('make an issuer key pair: keep the private key secret, put the public key in LICENSE_PUBLIC_KEYS')
    .option('--out <file>', 'write the private key (PEM) to this new file (mode 600) instead of printing it')
    .option('--json', 'print JSON')
    .action((o: { out?: string; json?: boolean }) => {
      const { privateKey, publicKey } = generateKeyPairSync('ed25519');
      const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
      if (o.out) writeFileSync(o.out, pem, { mode: 0o600, flag: 'wx' });
      print({ ...(o.out ? { private_key_file: o.out } : { private_key: pem.trim() }), public_key: publicKeyText(publicKey), issuer_key_id: issuerKeyId(publicKey) }, o.json ?? false);
    });

  license
    .command('issue')
    .description('sign an activation key with an issuer private key')
    .requiredOption('--private-key <file>', 'the issuer private key (PEM, from license keygen)')
    .requiredOption('--limit <n>', 'most concurrent workspaces', int)
    .requiredOption('--expires <when>', 'ISO date, or a span from now (365d, 12h)')
    .option('--type <license_type>', 'license_type', 'Per Concurrent Session')
    .option('--sku <sku>', 'sku', 'WS-SELF-HOSTED')
    .option('--issued-to <name>', 'who the license is for (empty: the activation may name it)', '')
    .option('--feature <name>', `a feature to grant (repeat; "all" for every one): ${LICENSE_FEATURES.join(', ')}`, collect, [])
    .option('--license-id <id>', 'the license id (default: a new random one)')
    .action((o: { privateKey: string; limit: number; expires: string; type: string; sku: string; issuedTo: string; feature: string[]; licenseId?: string }) => {
      const key = parseIssuerPrivateKey(readFileSync(o.privateKey, 'utf8'));
      if (o.limit < 1) throw new Error('--limit must be at least 1');
      console.log(issueLicenseKey({
        license_id: o.licenseId ?? randomUUID().replace(/-/g, ''),
        license_type: o.type, sku: o.sku, limit: o.limit, expiration: expiry(o.expires), issued_at: new Date(), issued_to: o.issuedTo,
        features: featureSet(features(o.feature)),
      }, key));
    });

  license
    .command('activate <activation_key>')
    .description('apply a license, as the activate operation does (at once on every api process and worker)')
    .option('--seats <n>', 'concurrent workspaces to apply (default: the license limit)', int)
    .option('--issued-to <name>', 'used when the key leaves issued_to empty')
    .option('--json', 'print JSON')
    .action(async (key: string, o: { seats?: number; issuedTo?: string; json?: boolean }) => {
      const applied = await (await service(LicensingService)).activate({ activation_key: key, seats: o.seats, issued_to: o.issuedTo });
      print(toLicenseResponse(applied), o.json ?? false);
    });

  license
    .command('show')
    .description('the license in force, or the free tier when none is')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const entitlements = await service(Entitlements);
      const applied = await entitlements.current();
      if (applied) {
        print({ ...toLicenseResponse(applied), entitlement_limit: applied.entitlement.limit, activated_at: formatTimestamp(applied.activatedAt), issuer_key_id: applied.entitlement.issuer_key_id }, o.json ?? false);
      } else {
        const config = await service(AppConfig);
        print({ license: null, tier: 'free', limit: config.UNLICENSED_SESSION_LIMIT, features: await entitlements.features() }, o.json ?? false);
      }
    });

  license
    .command('list')
    .description('every activation, newest first (the newest that verifies and has not expired applies)')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const rows = await (await service(LicensingService)).activations();
      print(rows.map((r) => ({ license_id: r.licenseId, seats: r.seats, issued_to: r.issuedTo, activated_at: formatTimestamp(r.activatedAt), problem: r.problem })), o.json ?? false);
    });

  license
    .command('remove <license_id>')
    .description('forget an activation; the next newest, or the free tier, applies')
    .action(async (licenseId: string) => {
      const removed = await (await service(LicensingService)).remove(licenseId);
      console.log(removed ? `removed ${licenseId}` : `no activation of ${licenseId}`);
    });
}
