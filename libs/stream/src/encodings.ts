/** RFB encoding numbers (RFC 6143 §7.7/§7.8 and the community registry). Values are signed 32-bit. */
export const Encoding = {
  Raw: 0,
  CopyRect: 1,
  RRE: 2,
  Hextile: 5,
  Zlib: 6,
  Tight: 7,
  ZRLE: 16,
  DesktopSize: -223,
  LastRect: -224,
  PointerPos: -232,
  Cursor: -239,
  XCursor: -240,
  QemuExtendedKeyEvent: -258,
  TightPng: -260,
  QemuLedState: -261,
  DesktopName: -307,
  ExtendedDesktopSize: -308,
  Xvp: -309,
  Fence: -312,
  ContinuousUpdates: -313,
  ExtendedMouseButtons: -316,
  ExtendedClipboard: -1063131698, // 0xc0a1e5ce
} as const;

const NAMES: ReadonlyMap<number, string> = new Map([
  [Encoding.Raw, 'raw'],
  [Encoding.CopyRect, 'copyrect'],
  [Encoding.RRE, 'rre'],
  [Encoding.Hextile, 'hextile'],
  [Encoding.Zlib, 'zlib'],
  [Encoding.Tight, 'tight'],
  [Encoding.ZRLE, 'zrle'],
  [Encoding.DesktopSize, 'desktopsize'],
  [Encoding.LastRect, 'lastrect'],
  [Encoding.PointerPos, 'pointerpos'],
  [Encoding.Cursor, 'cursor'],
  [Encoding.XCursor, 'xcursor'],
  [Encoding.QemuExtendedKeyEvent, 'qemu_extended_key'],
  [Encoding.QemuLedState, 'qemu_led_state'],
  [Encoding.DesktopName, 'desktopname'],
  [Encoding.ExtendedDesktopSize, 'extended_desktopsize'],
]);

/** Stable lower-case name used as the key of per-encoding statistics. */
export function encodingName(encoding: number): string {
  return NAMES.get(encoding) ?? `encoding_${encoding}`;
}

/** Encodings that carry framebuffer pixels (their rects count towards `changed`). */
export const PIXEL_ENCODINGS: ReadonlySet<number> = new Set([Encoding.Raw, Encoding.CopyRect, Encoding.Tight, Encoding.ZRLE]);

/**
 * Pseudo-encodings whose server payload the proxy can size exactly (see rfb-parser.ts), plus pure
 * client-side hints that never appear in the server stream.
 */
const PROXY_PSEUDO: ReadonlySet<number> = new Set([
  Encoding.DesktopSize, // no payload
  Encoding.LastRect, // no payload; ends the update
  Encoding.PointerPos, // no payload (x, y of the rect)
  Encoding.Cursor, // w*h*bpp + ceil(w/8)*h mask
  Encoding.XCursor, // 6 + 2*ceil(w/8)*h (none when w*h = 0)
  Encoding.QemuExtendedKeyEvent, // no payload; client then may send QEMU key events (255/0, 12 bytes)
  Encoding.QemuLedState, // 1 byte
  Encoding.DesktopName, // u32 length + name
  Encoding.ExtendedDesktopSize, // u8 screens, 3 pad, 16 per screen
]);

/**
 * Pseudo-encodings that announce a message type rather than a rect, whose messages the proxy follows in both
 * directions (rfb-parser.ts): Fence and ContinuousUpdates. With them a server that has them (TigerVNC's Xvnc) sends
 * updates as they happen instead of one per request, paced by its own congestion control, which measures the round
 * trip with fences.
 */
const PROXY_MESSAGES: ReadonlySet<number> = new Set([Encoding.Fence, Encoding.ContinuousUpdates]);

function isHint(encoding: number): boolean {
  return (
    (encoding >= -32 && encoding <= -23) || // JPEG quality level 0..9
    (encoding >= -256 && encoding <= -247) || // compression level 0..9
    (encoding >= -512 && encoding <= -412) || // TurboVNC fine-grained quality 0..100
    (encoding >= -768 && encoding <= -763) // TurboVNC JPEG subsampling
  );
}

/**
 * True when the proxy can follow this encoding in the server→client stream: Raw, CopyRect, Tight (lengths
 * parsed, nothing decoded), ZRLE, the sized pseudo-encodings above, the messages it follows (Fence,
 * ContinuousUpdates) and the quality/compression hints. Everything else (Hextile, RRE, Zlib, TightPNG, H.264,
 * ExtendedClipboard, ExtendedMouseButtons, xvp, VMware cursor...) changes the stream in ways the proxy cannot size.
 */
export function proxySupportsEncoding(encoding: number): boolean {
  return encoding === Encoding.Raw || PIXEL_ENCODINGS.has(encoding) || PROXY_PSEUDO.has(encoding) || PROXY_MESSAGES.has(encoding) || isHint(encoding);
}
