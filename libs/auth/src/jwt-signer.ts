import { createSecretKey, KeyObject } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import * as jwt from 'jsonwebtoken';
import { SettingsService } from '@ws/settings';

/** Claims of a user session JWT. `sid` names the session_tokens row, `gen` the generation it was signed for. */
export interface SessionClaims {
  sub: string;
  sid: string;
  gen: number;
  /** Set for a view-only link to a shared workspace. */
  view_only?: boolean;
  workspace_id?: string;
}

@Injectable()
export class JwtSigner {
  /**
   * The signing key as a KeyObject, made once: given a string, jsonwebtoken first tries it as a PEM private key
   * (which throws) on every sign and verify, and that failed parse cost more CPU than the rest of a status call's
   * signing. The key itself never changes once made (SettingsService.jwtSigningKey), so neither can this.
   */
  private key: KeyObject | null = null;

  constructor(private readonly settings: SettingsService) {}

  async sign(claims: SessionClaims, expiresAt: Date): Promise<string> {
    const key = await this.signingKey();
    return jwt.sign({ ...claims, exp: Math.floor(expiresAt.getTime() / 1000) }, key, { algorithm: 'HS256', issuer: 'workspace-server' });
  }

  /** The claims of a well-formed, correctly signed, unexpired token; null otherwise. Revocation is the caller's check. */
  async verify(token: string): Promise<(SessionClaims & { exp: number; iat: number }) | null> {
    const key = await this.signingKey();
    try {
      const claims = jwt.verify(token, key, { algorithms: ['HS256'], issuer: 'workspace-server' });
      if (typeof claims !== 'object' || typeof claims.sub !== 'string' || typeof claims.sid !== 'string') return null;
      return claims as SessionClaims & { exp: number; iat: number };
    } catch {
      return null;
    }
  }

  private async signingKey(): Promise<KeyObject> {
    // The same bytes jsonwebtoken would make of the string (Buffer.from: UTF-8), so tokens are unchanged.
    this.key ??= createSecretKey(Buffer.from(await this.settings.jwtSigningKey(), 'utf8'));
    return this.key;
  }
}
