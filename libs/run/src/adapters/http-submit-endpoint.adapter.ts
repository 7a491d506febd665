/**
 * The submission endpoint: HTTP/1.1 on a Unix domain socket (never TCP), bind-mounted into Work (as
 * /run/assay/submit.sock by default). Routes:
 *
 *   POST /submit        no body, no query; `Authorization: Bearer <token>`  -> the footer (text/plain)
 *   GET  /submissions   this run's history; `Accept: application/json` for JSON
 *
 * Every input is hostile: headers are bounded (8 KiB) and must arrive within 10 s, a request body is never read
 * (its presence alone is a 422: Content-Length other than 0, or any Transfer-Encoding), one request per connection,
 * at most 64 connections. The socket is created with the mode given (default 0666: the agent inside Work may run
 * as any user; confine access with the directory that holds it on the host, and mount only the socket into Work).
 */
import * as http from 'node:http';
import { listenOnSocket, removeSocketFile } from './unix-socket';
import type { SubmissionGateway } from '../ports/submission-gateway.port';

export interface SubmitEndpointOptions {
  readonly socketPath: string;
  readonly gateway: SubmissionGateway;
  /** File mode of the socket (default 0o666). */
  readonly mode?: number;
  readonly maxConnections?: number;
  /** Called with errors the endpoint answered with a 500 (never shown to the agent). */
  readonly onError?: (e: unknown) => void;
}

const TEXT = 'text/plain; charset=utf-8';

export class SubmitEndpoint {
  private constructor(
    private readonly server: http.Server,
    readonly socketPath: string,
  ) {}

  static async listen(o: SubmitEndpointOptions): Promise<SubmitEndpoint> {
    const server = http.createServer(
      { maxHeaderSize: 8192, requestTimeout: 15_000, headersTimeout: 10_000, keepAliveTimeout: 1000, joinDuplicateHeaders: false },
      (req, res) => {
        void handle(o, req, res);
      },
    );
    server.maxConnections = o.maxConnections ?? 64;
    server.maxRequestsPerSocket = 1;
    // A reply may wait for a Judge for a long time: no socket inactivity timeout once the request is in.
    server.timeout = 0;
    await listenOnSocket(server, o.socketPath, o.mode);
    return new SubmitEndpoint(server, o.socketPath);
  }

  /** Stops accepting, ends open connections, removes the socket file. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    removeSocketFile(this.socketPath);
  }
}

function send(res: http.ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  res.writeHead(status, {
    'Content-Type': TEXT,
    'Cache-Control': 'no-store',
    Connection: 'close',
    'X-Content-Type-Options': 'nosniff',
    ...headers,
    'Content-Length': String(Buffer.byteLength(body)),
  });
  res.end(body);
}

async function handle(o: SubmitEndpointOptions, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  // Never read a request body: answer, then drop the connection.
  res.on('finish', () => req.socket.destroySoon?.());
  try {
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const hasQuery = q >= 0;
    const len = req.headers['content-length'];
    const hasBody = (len !== undefined && len !== '0') || req.headers['transfer-encoding'] !== undefined;
    const authorization = req.headersDistinct.authorization;
    if (path === '/submit') {
      if (req.method !== 'POST') return send(res, 405, 'method not allowed: use POST /submit\n', { Allow: 'POST' });
      const r = await o.gateway.submit({ authorization, hasBody, hasQuery });
      const headers: Record<string, string> = {};
      if (r.round !== null) headers['X-Assay-Round'] = String(r.round);
      headers['X-Assay-Status'] = r.status;
      if (r.retryAfterSec !== null) headers['Retry-After'] = String(Math.max(1, r.retryAfterSec));
      return send(res, r.httpStatus, r.text, headers);
    }
    if (path === '/submissions') {
      if (req.method !== 'GET') return send(res, 405, 'method not allowed: use GET /submissions\n', { Allow: 'GET' });
      if (hasQuery || hasBody) return send(res, 422, 'GET /submissions takes no query string and no body\n');
      const accept = req.headers.accept ?? '';
      const r = await o.gateway.history({ authorization, json: /\bapplication\/json\b/i.test(accept) });
      return send(res, r.httpStatus, r.body, { 'Content-Type': r.contentType });
    }
    return send(res, 404, 'not found: the endpoint serves POST /submit and GET /submissions\n');
  } catch (e) {
    o.onError?.(e);
    send(res, 500, 'internal error in the submission endpoint; the operator has the details\n');
  }
}
