/**
 * DES for VNC Authentication (RFC 6143 §7.2.2). Node's OpenSSL 3 build usually lacks single 'des-ecb'
 * (legacy provider), so `vncAuthResponse` picks the first working backend once:
 *   1. OpenSSL 'des-ecb'
 *   2. OpenSSL 'des-ede-ecb' with key K||K (two-key EDE with K1 = K2 is exactly single DES)
 *   3. the small pure-TypeScript DES below (FIPS 46-3; encryption only, clarity over speed).
 * A backend is only used after it reproduces the FIPS 46 example vector.
 */
import { createCipheriv } from 'crypto';

// prettier-ignore
const IP = [58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4, 62, 54, 46, 38, 30, 22, 14, 6, 64, 56, 48, 40, 32, 24, 16, 8,
  57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3, 61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7];
// prettier-ignore
const FP = [40, 8, 48, 16, 56, 24, 64, 32, 39, 7, 47, 15, 55, 23, 63, 31, 38, 6, 46, 14, 54, 22, 62, 30, 37, 5, 45, 13, 53, 21, 61, 29,
  36, 4, 44, 12, 52, 20, 60, 28, 35, 3, 43, 11, 51, 19, 59, 27, 34, 2, 42, 10, 50, 18, 58, 26, 33, 1, 41, 9, 49, 17, 57, 25];
// prettier-ignore
const E = [32, 1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 8, 9, 10, 11, 12, 13, 12, 13, 14, 15, 16, 17,
  16, 17, 18, 19, 20, 21, 20, 21, 22, 23, 24, 25, 24, 25, 26, 27, 28, 29, 28, 29, 30, 31, 32, 1];
// prettier-ignore
const P = [16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10, 2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25];
// prettier-ignore
const PC1 = [57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18, 10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44, 36,
  63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4];
// prettier-ignore
const PC2 = [14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2,
  41, 52, 31, 37, 47, 55, 30, 40, 51, 45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32];
const SHIFTS = [1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1];
// prettier-ignore
const S: number[][] = [
  [14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7, 0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8,
    4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0, 15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13],
  [15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10, 3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5,
    0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15, 13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9],
  [10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8, 13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1,
    13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7, 1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12],
  [7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15, 13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9,
    10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4, 3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14],
  [2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9, 14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6,
    4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14, 11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3],
  [12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11, 10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8,
    9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6, 4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13],
  [4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1, 13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6,
    1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2, 6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12],
  [13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7, 1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2,
    7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8, 2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11],
];

/** Bits of `bytes`, most significant first (bit 1 of DES numbering = index 0). */
function toBits(bytes: Uint8Array): number[] {
  const bits: number[] = [];
  for (const byte of bytes) for (let i = 7; i >= 0; i--) bits.push((byte >> i) & 1);
  return bits;
}

function fromBits(bits: number[]): Buffer {
  const out = Buffer.alloc(bits.length / 8);
  for (let i = 0; i < bits.length; i++) out[i >> 3] |= bits[i] << (7 - (i & 7));
  return out;
}

const permute = (bits: number[], table: number[]): number[] => table.map((position) => bits[position - 1]);

function subkeys(key: Uint8Array): number[][] {
  const cd = permute(toBits(key), PC1);
  let c = cd.slice(0, 28);
  let d = cd.slice(28);
  const keys: number[][] = [];
  for (const shift of SHIFTS) {
    c = c.slice(shift).concat(c.slice(0, shift));
    d = d.slice(shift).concat(d.slice(0, shift));
    keys.push(permute(c.concat(d), PC2));
  }
  return keys;
}

function feistel(right: number[], key: number[]): number[] {
  const x = permute(right, E).map((bit, i) => bit ^ key[i]);
  const out: number[] = [];
  for (let box = 0; box < 8; box++) {
    const b = x.slice(box * 6, box * 6 + 6);
    const value = S[box][((b[0] << 1) | b[5]) * 16 + ((b[1] << 3) | (b[2] << 2) | (b[3] << 1) | b[4])];
    for (let i = 3; i >= 0; i--) out.push((value >> i) & 1);
  }
  return permute(out, P);
}

/** Pure-TypeScript single-block DES encryption (8-byte key incl. parity bits, 8-byte block). */
export function desEncryptBlock(key: Uint8Array, block: Uint8Array): Buffer {
  if (key.length !== 8 || block.length !== 8) throw new RangeError('DES key and block must be 8 bytes');
  const bits = permute(toBits(block), IP);
  let left = bits.slice(0, 32);
  let right = bits.slice(32);
  for (const k of subkeys(key)) {
    const f = feistel(right, k);
    const next = left.map((bit, i) => bit ^ f[i]);
    left = right;
    right = next;
  }
  return fromBits(permute(right.concat(left), FP));
}

export type DesBackend = 'openssl-des-ecb' | 'openssl-des-ede-ecb' | 'pure-ts';
type EcbEncrypt = (key: Buffer, data: Buffer) => Buffer;

function opensslEcb(cipher: string, expandKey: (key: Buffer) => Buffer): EcbEncrypt {
  return (key, data) => {
    const c = createCipheriv(cipher, expandKey(key), null);
    c.setAutoPadding(false);
    return Buffer.concat([c.update(data), c.final()]);
  };
}

const pureEcb: EcbEncrypt = (key, data) => {
  const out = Buffer.alloc(data.length);
  for (let i = 0; i < data.length; i += 8) desEncryptBlock(key, data.subarray(i, i + 8)).copy(out, i);
  return out;
};

const FIPS_KEY = Buffer.from('133457799bbcdff1', 'hex');
const FIPS_PLAIN = Buffer.from('0123456789abcdef', 'hex');
const FIPS_CIPHER = '85e813540f0ab405';

let selected: { name: DesBackend; encrypt: EcbEncrypt } | undefined;

function backend(): { name: DesBackend; encrypt: EcbEncrypt } {
  if (selected) return selected;
  const candidates: { name: DesBackend; encrypt: EcbEncrypt }[] = [
    { name: 'openssl-des-ecb', encrypt: opensslEcb('des-ecb', (k) => k) },
    { name: 'openssl-des-ede-ecb', encrypt: opensslEcb('des-ede-ecb', (k) => Buffer.concat([k, k])) },
  ];
  for (const candidate of candidates) {
    try {
      if (candidate.encrypt(FIPS_KEY, FIPS_PLAIN).toString('hex') === FIPS_CIPHER) return (selected = candidate);
    } catch {
      // cipher not available in this OpenSSL build; try the next one
    }
  }
  return (selected = { name: 'pure-ts', encrypt: pureEcb });
}

/** Which DES implementation this process uses (detected once). */
export function desBackend(): DesBackend {
  return backend().name;
}

/** Encrypts `data` (multiple of 8 bytes) with DES-ECB, through the detected backend or forced to `use`. */
export function desEcbEncrypt(key: Uint8Array, data: Uint8Array, use?: 'pure-ts'): Buffer {
  if (key.length !== 8 || data.length % 8 !== 0) throw new RangeError('DES-ECB needs an 8-byte key and a multiple of 8 bytes');
  const encrypt = use === 'pure-ts' ? pureEcb : backend().encrypt;
  return encrypt(Buffer.from(key), Buffer.from(data));
}

function reverseBits(byte: number): number {
  let out = 0;
  for (let i = 0; i < 8; i++) out |= ((byte >> i) & 1) << (7 - i);
  return out;
}

/**
 * VNC's DES key: the password's first 8 bytes (latin1; shorter ones zero-padded), each byte bit-reversed
 * (VNC's d3des takes key bits least significant first).
 */
export function vncAuthKey(password: string | Uint8Array): Buffer {
  const raw = typeof password === 'string' ? Buffer.from(password, 'latin1') : Buffer.from(password);
  const key = Buffer.alloc(8);
  for (let i = 0; i < 8 && i < raw.length; i++) key[i] = reverseBits(raw[i]);
  return key;
}

/** The 16-byte response to a VNC Authentication challenge: DES-ECB of the challenge under `vncAuthKey(password)`. */
export function vncAuthResponse(password: string | Uint8Array, challenge: Uint8Array, use?: 'pure-ts'): Buffer {
  if (challenge.length !== 16) throw new RangeError('VNC challenge must be 16 bytes');
  return desEcbEncrypt(vncAuthKey(password), challenge, use);
}
