import { AddressInfo, createServer, Server, Socket } from 'node:net';
import { AudioCredentialError, authenticateToAudioPort, openAudioPort } from './audio-credential';
import { openDesktopTcp } from './desktop-tcp';

const SECRET = 'a'.repeat(64);

/** A real TCP port whose per-connection behaviour is `serve` (the bridge side); answers the gateway's socket. */
async function portServing(serve: (connection: Socket) => void): Promise<{ server: Server; client: Socket; accepted: Socket[] }> {
  const accepted: Socket[] = [];
  const server = createServer((connection) => {
    accepted.push(connection);
    serve(connection);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = await openDesktopTcp('127.0.0.1', (server.address() as AddressInfo).port, 5000);
  client.on('error', () => undefined);
  return { server, client, accepted };
}

/** Collects what the client sent until its first newline, then calls `answer` with it. */
function onFirstLine(connection: Socket, answer: (line: string) => void): void {
  let text = '';
  connection.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
    const end = text.indexOf('\n');
    if (end >= 0) answer(text.slice(0, end));
  });
  connection.on('error', () => undefined);
}

describe('authenticateToAudioPort', () => {
  const open: Array<{ server: Server; client: Socket; accepted: Socket[] }> = [];
  afterEach(async () => {
    for (const { server, client, accepted } of open.splice(0)) {
      client.destroy();
      for (const connection of accepted) connection.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
  const serving = async (serve: (connection: Socket) => void) => {
    const pair = await portServing(serve);
    open.push(pair);
    return pair.client;
  };

  it('sends the secret as the first line and answers what followed OK, with the socket paused', async () => {
    let line: string | null = null;
    const client = await serving((c) => onFirstLine(c, (l) => {
      line = l;
      c.write('OK\nOggS-start');
    }));
    const rest = await authenticateToAudioPort(client, SECRET, 5000);
    expect(line).toBe(SECRET);
    expect(rest.toString()).toBe('OggS-start');
    expect(client.isPaused()).toBe(true);
  });

  it('fails when the port closes without a byte (a wrong credential)', async () => {
    const client = await serving((c) => onFirstLine(c, () => c.destroy()));
    await expect(authenticateToAudioPort(client, SECRET, 5000)).rejects.toThrow(/closed the connection without accepting/);
  });

  it('fails when the port streams without the credential protocol (an image without the check)', async () => {
    const client = await serving((c) => c.write('OggS\0\x02'));
    await expect(authenticateToAudioPort(client, SECRET, 5000)).rejects.toThrow(/something other than the credential protocol/);
  });

  it('fails after the timeout when the port never acknowledges', async () => {
    const client = await serving((c) => c.on('error', () => undefined));
    await expect(authenticateToAudioPort(client, SECRET, 200)).rejects.toThrow(/did not acknowledge/);
  });

  it('refuses a secret the bridge could not read as one line, without sending it', async () => {
    let received = 0;
    const client = await serving((c) => c.on('data', (chunk: Buffer) => (received += chunk.length)));
    for (const secret of ['', 'two\nlines', 'x'.repeat(256)]) {
      const attempt = authenticateToAudioPort(client, secret, 5000);
      await expect(attempt).rejects.toBeInstanceOf(AudioCredentialError);
      await expect(attempt).rejects.not.toThrow(secret || 'never');
    }
    expect(received).toBe(0);
  });
});

describe('openAudioPort', () => {
  const servers: Server[] = [];
  const accepted: Socket[] = [];
  afterEach(async () => {
    for (const connection of accepted.splice(0)) connection.destroy();
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  });
  const listening = async (server: Server, port = 0) => {
    server.on('connection', (connection) => accepted.push(connection));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return server;
  };
  /** A port whose first `hangUps` connections are hung up on at once (nothing listening behind Docker's proxy yet), then served. */
  const startingPort = async (hangUps: number, serve: (connection: Socket) => void) => {
    let connections = 0;
    const server = createServer((connection) => {
      connection.on('error', () => undefined);
      // Closed, or reset (as Docker's port proxy does), in turn.
      if (++connections <= hangUps) {
        if (connections % 2) connection.destroy();
        else connection.resetAndDestroy();
      }
      else serve(connection);
    });
    await listening(server);
    return { connect: () => openDesktopTcp('127.0.0.1', (server.address() as AddressInfo).port, 5000), connections: () => connections };
  };
  const accept = (c: Socket) => onFirstLine(c, (line) => c.write(line === SECRET ? 'OK\nOggS' : '', () => line === SECRET || c.destroy()));

  it('tries again while the port hangs up (closes or resets) without a byte, and connects once the bridge listens', async () => {
    const port = await startingPort(3, accept);
    const { socket, firstBytes } = await openAudioPort(port.connect, SECRET, { credentialTimeoutMs: 5000, waitMs: 5000, retryMs: 20 });
    expect(firstBytes.toString()).toBe('OggS');
    expect(port.connections()).toBe(4);
    socket.destroy();
  });

  it('tries again while the port refuses the connection', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    let attempts = 0;
    const connect = async () => {
      if (++attempts === 3) {
        await listening(createServer(accept), port);
      }
      return openDesktopTcp('127.0.0.1', port, 5000);
    };
    const { socket } = await openAudioPort(connect, SECRET, { credentialTimeoutMs: 5000, waitMs: 5000, retryMs: 20 });
    expect(attempts).toBe(3);
    socket.destroy();
  });

  it('gives up after its bound with the hang-up, and at once on any other failure', async () => {
    const never = await startingPort(Infinity, accept);
    await expect(openAudioPort(never.connect, SECRET, { credentialTimeoutMs: 5000, waitMs: 200, retryMs: 20 })).rejects.toThrow(/closed the connection without accepting|ECONNRESET/);
    expect(never.connections()).toBeGreaterThan(1);
    expect(never.connections()).toBeLessThanOrEqual(10);
    const foreign = await startingPort(0, (c) => c.write('OggS\0\x02'));
    await expect(openAudioPort(foreign.connect, SECRET, { credentialTimeoutMs: 5000, waitMs: 5000, retryMs: 20 })).rejects.toThrow(/something other than the credential protocol/);
    expect(foreign.connections()).toBe(1);
  });
});
