import { QUEUE_DASHBOARD_CSP, withoutExternalLinks } from './queue-dashboard';

describe('queue dashboard page', () => {
  it('drops links to other sites and keeps the package\'s own files', () => {
    const page = [
      '<link rel="icon" type="image/svg+xml" id="fav-logo" href="static/images/logo.svg">',
      '<link href="https://fonts.example/css2?family=X&display=swap" rel="stylesheet">',
      "<link rel='stylesheet' href='//cdn.example/x.css'>",
      '<link href="static/css/main.css" rel="stylesheet"></head>',
    ].join('\n');
    expect(withoutExternalLinks(page)).toBe(['<link rel="icon" type="image/svg+xml" id="fav-logo" href="static/images/logo.svg">', '', '', '<link href="static/css/main.css" rel="stylesheet"></head>'].join('\n'));
  });

  it('allows nothing but this origin', () => {
    expect(QUEUE_DASHBOARD_CSP).not.toMatch(/https?:|\*|'unsafe-eval'/);
    expect(QUEUE_DASHBOARD_CSP).toContain("default-src 'none'");
    expect(QUEUE_DASHBOARD_CSP).toContain("script-src 'self'");
  });
});
