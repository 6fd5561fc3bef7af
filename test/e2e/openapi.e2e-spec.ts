import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OPERATIONS } from '@ws/auth';
import { ensureChromium, launchChromium } from './browser';
import { TestApi } from './harness';

describe('the OpenAPI document and the reference page', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await TestApi.start();
  });
  afterAll(async () => api?.close());

  it('GET /api/openapi.json answers the committed document, without a key', async () => {
    const res = await api.raw().get('/api/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual(JSON.parse(readFileSync(join(__dirname, '..', '..', 'openapi.json'), 'utf8')));
    expect(res.body.openapi).toBe('3.1.0');
    expect(res.body.paths['/api/public/create_user'].post['x-permissions']).toEqual(['Users Create']);
  });

  it('GET /api/docs is a page whose scripts and styles all come from this api', async () => {
    const page = await api.raw().get('/api/docs');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets.sort()).toEqual(['/api/docs/favicon-32x32.png', '/api/docs/init.js', '/api/docs/swagger-ui-bundle.js', '/api/docs/swagger-ui.css']);
    for (const asset of assets) {
      const res = await api.raw().get(asset);
      expect({ asset, status: res.status }).toEqual({ asset, status: 200 });
    }
    expect((await api.raw().get('/api/docs/init.js')).text).toContain("url: '/api/openapi.json'");
  });

  it('renders every operation in a browser, under its content security policy', async () => {
    ensureChromium();
    const base = await api.listen();
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const refused: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error') refused.push(message.text());
      });
      await page.goto(`${base}/api/docs`);
      await page.waitForSelector('.opblock-summary-path', { timeout: 60_000 });
      const paths = await page.$$eval('.opblock-summary-path', (nodes) => nodes.map((n) => n.getAttribute('data-path')));
      for (const name of Object.keys(OPERATIONS)) expect(paths).toContain(`/api/public/${name}`);
      if (process.env.WS_TEST_SCREENSHOT_DIR) await page.screenshot({ path: join(process.env.WS_TEST_SCREENSHOT_DIR, 'api-docs.png') });
      expect(refused).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
