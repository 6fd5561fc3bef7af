import { addressList, ConfigError, loadConfig } from './config';

describe('loadConfig', () => {
  it('serves a local machine with no variables set', () => {
    const config = loadConfig({});
    expect(config.DATABASE_HOST).toBe('127.0.0.1');
    expect(config.DATABASE_PORT).toBe(5432);
    expect(config.REDIS_URL).toBe('redis://127.0.0.1:6379');
  });

  it('trusts no proxy by default and takes IPs and CIDRs of both families', () => {
    expect(addressList(loadConfig({}).TRUSTED_PROXIES)).toEqual([]);
    const config = loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8, 127.0.0.1,::1,fd00::/8' });
    expect(addressList(config.TRUSTED_PROXIES)).toEqual(['10.0.0.0/8', '127.0.0.1', '::1', 'fd00::/8']);
  });

  it('converts numbers', () => {
    expect(loadConfig({ API_PORT: '9000' }).API_PORT).toBe(9000);
  });

  it.each([
    ['API_PORT', 'eighty'],
    ['DATABASE_PORT', '70000'],
    ['REDIS_URL', 'http://x'],
    ['PUBLIC_BASE_URL', 'http://host/'],
    ['STORAGE_URL', 'ftp://x'],
    ['TRUSTED_PROXIES', '10.0.0.0/33'],
    ['TRUSTED_PROXIES', 'proxy.internal'],
    ['TRUSTED_PROXIES', '10.0.0.1/8/8'],
    ['AUTH_FAILURES_PER_ADDRESS', '0'],
  ])('refuses %s=%s and names the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });
});
