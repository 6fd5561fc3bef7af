import { ConfigError, loadConfig } from './config';

describe('loadConfig', () => {
  it('serves a local machine with no variables set', () => {
    const config = loadConfig({});
    expect(config.DATABASE_HOST).toBe('127.0.0.1');
    expect(config.DATABASE_PORT).toBe(5432);
    expect(config.REDIS_URL).toBe('redis://127.0.0.1:6379');
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
  ])('refuses %s=%s and names the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });
});
