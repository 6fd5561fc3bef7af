import { ConfigError, loadConfig } from '@ws/common';
import { FileObjectStore } from './file-store';
import { StorageError } from './object-store';
import { openStore } from './open-store';
import { S3ObjectStore } from './s3-store';

describe('openStore and the storage settings', () => {
  const settings = loadConfig({});

  it('opens file:// urls relative to the working directory or absolute', () => {
    const relative = openStore('file://./data/storage', settings);
    expect(relative).toBeInstanceOf(FileObjectStore);
    expect((relative as FileObjectStore).root).toBe(`${process.cwd()}/data/storage`);
    expect((openStore('file:///srv/objects', settings) as FileObjectStore).root).toBe('/srv/objects');
  });

  it('opens s3:// urls with a bucket and an optional prefix', async () => {
    const plain = openStore('s3://my-bucket', settings) as S3ObjectStore;
    expect(plain).toBeInstanceOf(S3ObjectStore);
    expect(plain.bucket).toBe('my-bucket');
    const prefixed = openStore('s3://my-bucket/deployments/a/', { ...settings, S3_REGION: 'eu-west-1' }) as S3ObjectStore;
    expect(prefixed.bucket).toBe('my-bucket');
    expect(await prefixed.client.config.region()).toBe('eu-west-1');
    plain.close();
    prefixed.close();
  });

  it.each(['file://', 's3://', 's3://UPPER', 's3://a', 'http://x', 'ftp://y/z'])('refuses %s', (url) => {
    expect(() => openStore(url, settings)).toThrow(StorageError);
  });

  it('reads S3_* and STORAGE_SIGNING_SECRET from the environment, and refuses bad values', () => {
    const config = loadConfig({ S3_ENDPOINT: 'http://127.0.0.1:9000', S3_FORCE_PATH_STYLE: 'true', S3_PART_SIZE_MB: '16', S3_REGION: 'eu-central-1' });
    expect(config).toMatchObject({ S3_ENDPOINT: 'http://127.0.0.1:9000', S3_FORCE_PATH_STYLE: true, S3_PART_SIZE_MB: 16, S3_REGION: 'eu-central-1', STORAGE_SIGNING_SECRET: '' });
    expect(loadConfig({ S3_FORCE_PATH_STYLE: 'false' }).S3_FORCE_PATH_STYLE).toBe(false);
    for (const env of [{ S3_FORCE_PATH_STYLE: 'yes' }, { S3_PART_SIZE_MB: '4' }, { S3_ENDPOINT: '127.0.0.1:9000' }, { STORAGE_SIGNING_SECRET: 'short' }, { S3_REGION: 'EU WEST' }]) {
      expect(() => loadConfig(env)).toThrow(ConfigError);
    }
  });
});
