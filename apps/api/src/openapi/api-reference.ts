import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { findRepoRoot, serveFile } from '../web/web-client';

/** The committed, generated document (`npm run openapi` writes it; a unit test fails when it is stale). */
export const OPENAPI_FILE = 'openapi.json';

/**
 * `GET /api/openapi.json`: the OpenAPI 3.1 document; `GET /api/docs`: a browsable reference (Swagger UI from the
 * swagger-ui-dist package, served from here: no outside CDN). Plain fastify routes like the browser client's,
 * public by nature (the document is what an integrator reads before having a key).
 *
 * The api serves the committed openapi.json rather than generating it: the answers' schemas come from the
 * TypeScript compiler, which a running api does not have. The drift test keeps the file equal to the code.
 */
export function registerApiReference(fastify: FastifyInstance): void {
  const root = findRepoRoot(__dirname);
  const documentPath = join(root, OPENAPI_FILE);
  if (!existsSync(documentPath)) throw new Error(`${documentPath} is missing (npm run openapi)`);
  const document = readFileSync(documentPath);
  const uiDir = join(root, 'node_modules', 'swagger-ui-dist');
  if (!existsSync(join(uiDir, 'swagger-ui-bundle.js'))) throw new Error(`swagger-ui-dist not found in ${uiDir} (npm ci)`);
  const csp = [
    "default-src 'none'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:", "font-src 'self'",
    "connect-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
  ].join('; ');

  fastify.route({ method: ['GET', 'HEAD'], url: '/api/openapi.json', handler: (_request, reply) => sendText(reply, 'application/json; charset=utf-8', document) });
  fastify.route({ method: ['GET', 'HEAD'], url: '/api/docs', handler: (_request, reply) => sendText(reply, 'text/html; charset=utf-8', PAGE, csp) });
  fastify.route({ method: ['GET', 'HEAD'], url: '/api/docs/init.js', handler: (_request, reply) => sendText(reply, 'text/javascript; charset=utf-8', INIT) });
  for (const file of ['swagger-ui-bundle.js', 'swagger-ui.css', 'favicon-32x32.png']) {
    fastify.route({ method: ['GET', 'HEAD'], url: `/api/docs/${file}`, handler: (request, reply) => serveFile(request, reply, join(uiDir, file), csp) });
  }
}

function sendText(reply: FastifyReply, type: string, body: string | Buffer, csp?: string): FastifyReply {
  reply.header('cache-control', 'no-cache');
  reply.header('x-content-type-options', 'nosniff');
  if (csp) reply.header('content-security-policy', csp);
  return reply.type(type).send(body);
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>workspace-server API reference</title>
<link rel="icon" href="/api/docs/favicon-32x32.png">
<link rel="stylesheet" href="/api/docs/swagger-ui.css">
</head>
<body>
<div id="reference"></div>
<script src="/api/docs/swagger-ui-bundle.js"></script>
<script src="/api/docs/init.js"></script>
</body>
</html>
`;

// No "Try it out": the operations take an API key in the body, which this page should not collect.
const INIT = `window.ui = SwaggerUIBundle({ url: '/api/openapi.json', dom_id: '#reference', deepLinking: true, supportedSubmitMethods: [] });
`;
