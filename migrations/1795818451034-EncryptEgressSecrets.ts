import { MigrationInterface, QueryRunner } from 'typeorm';
import { SecretCipher } from '@ws/common';

/**
 * Egress credentials' secrets encrypted at rest (issue 21): every password, vpn_private_key, mesh_key and
 * custom_credential stored in clear is sealed with SERVER_CREDENTIALS_KEY, as libs/egress/src/egress-secrets.ts
 * does (same purpose, each value bound to its row id and column); an empty one becomes null (unset). Values already
 * sealed are left alone, so a run after a partial one finishes the work. Rows holding a secret and no key set:
 * the migration stops and names the variable. down opens them again (it needs the same key).
 */
const COLUMNS = ['password', 'vpn_private_key', 'mesh_key', 'custom_credential'] as const;
const PURPOSE = { info: 'egress credential secrets v1', what: "egress credentials' secrets", one: 'egress credential secret' };
const KEY_SETTING = 'SERVER_CREDENTIALS_KEY';

type Row = { id: string } & Record<(typeof COLUMNS)[number], string | null>;

export class EncryptEgressSecrets1795818451034 implements MigrationInterface {
    name = 'EncryptEgressSecrets1795818451034';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await this.rewrite(queryRunner, 'seal');
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await this.rewrite(queryRunner, 'open');
    }

    private async rewrite(queryRunner: QueryRunner, direction: 'seal' | 'open'): Promise<void> {
        const rows = (await queryRunner.query(
            `SELECT "id", "password", "vpn_private_key", "mesh_key", "custom_credential" FROM "egress_credentials"
             WHERE num_nonnulls("password", "vpn_private_key", "mesh_key", "custom_credential") > 0 ORDER BY "id" FOR UPDATE`,
        )) as Row[];
        if (rows.length === 0) return;
        const cipher = new SecretCipher(process.env[KEY_SETTING] ?? '', PURPOSE);
        const keyed = () => {
            if (cipher.configured) return cipher;
            throw new Error(
                `${KEY_SETTING} is not set: ${rows.length} egress credential(s) hold secrets, which are stored only encrypted ` +
                `from this version on; set a key of at least 32 characters (in the migration's environment too) and migrate again`,
            );
        };
        for (const row of rows) {
            const changed: Partial<Record<(typeof COLUMNS)[number], string | null>> = {};
            for (const column of COLUMNS) {
                const value = row[column];
                if (value === null) continue;
                const boundTo = `egress_credentials ${row.id} ${column}`;
                if (direction === 'seal') {
                    if (value === '') changed[column] = null;
                    else if (!SecretCipher.isSealed(value)) changed[column] = keyed().encrypt(value, boundTo);
                } else if (SecretCipher.isSealed(value)) {
                    changed[column] = keyed().decrypt(value, boundTo);
                }
            }
            const columns = Object.keys(changed) as Array<(typeof COLUMNS)[number]>;
            if (columns.length === 0) continue;
            await queryRunner.query(
                `UPDATE "egress_credentials" SET ${columns.map((c, i) => `"${c}" = $${i + 2}`).join(', ')} WHERE "id" = $1`,
                [row.id, ...columns.map((c) => changed[c])],
            );
        }
    }
}
