import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express, { type RequestHandler } from 'express';
import helmet, { type HelmetOptions } from 'helmet';
import { securityHeaders } from '../../apps/api/src/security-headers';

/** The headers a real HTTP answer carries when `mw` runs before a handler (date and keep-alive aside). */
async function headersWith(mw: RequestHandler): Promise<Record<string, string>> {
  const app = express();
  app.use(mw);
  app.get('/x', (_req, res) => {
    res.json({ ok: true });
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/x`);
    await res.arrayBuffer();
    const h: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      if (!['date', 'connection', 'keep-alive'].includes(k)) h[k] = v;
    });
    return h;
  } finally {
    server.close();
  }
}

describe('securityHeaders', () => {
  const configs: Array<[string, HelmetOptions]> = [
    ['defaults', {}],
    [
      "the API's policy",
      {
        contentSecurityPolicy: {
          useDefaults: true,
          directives: { 'default-src': ["'self'"], 'script-src': ["'self'"], 'img-src': ["'self'", 'data:'], 'upgrade-insecure-requests': null },
        },
      },
    ],
  ];

  it.each(configs)('answers with exactly the headers helmet itself sets (%s), x-powered-by removed', async (_name, options) => {
    const viaHelmet = await headersWith(helmet(options));
    const once = await headersWith(securityHeaders(options));
    expect(once).toEqual(viaHelmet);
    expect(once['content-security-policy']).toMatch(/default-src 'self'/);
    expect(once['x-powered-by']).toBeUndefined();
  });
});
