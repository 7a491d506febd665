import Fastify, { type FastifyInstance } from 'fastify';
import helmet, { type HelmetOptions } from 'helmet';
import { securityHeaders } from '../../apps/api/src/security-headers';

/** The headers a real HTTP answer of a Fastify server carries when `setup` has added its hooks (date and keep-alive aside). */
async function headersWith(setup: (app: FastifyInstance) => void): Promise<Record<string, string>> {
  const app = Fastify();
  setup(app);
  app.get('/x', async () => ({ ok: true }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const { port } = app.server.address() as { port: number };
    const res = await fetch(`http://127.0.0.1:${port}/x`);
    await res.arrayBuffer();
    const h: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      if (!['date', 'connection', 'keep-alive'].includes(k)) h[k] = v;
    });
    return h;
  } finally {
    await app.close();
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

  it.each(configs)('answers with exactly the headers helmet itself sets on the raw response (%s)', async (_name, options) => {
    // Helmet as it is meant to run: its middleware chain on Node's own request and response, per request.
    const viaHelmet = await headersWith((app) =>
      app.addHook('onRequest', (req, reply, done) => helmet(options)(req.raw, reply.raw, (e) => done(e as Error | undefined))),
    );
    const once = await headersWith((app) => app.addHook('onRequest', securityHeaders(options)));
    expect(once).toEqual(viaHelmet);
    expect(Object.keys(viaHelmet).length).toBeGreaterThan(8);
    expect(once['content-security-policy']).toMatch(/default-src 'self'/);
    expect(once['x-powered-by']).toBeUndefined();
  });
});
