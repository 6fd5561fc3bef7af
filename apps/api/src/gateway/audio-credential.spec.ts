import { AddressInfo, createServer, Server, Socket } from 'node:net';
import { AudioCredentialError, authenticateToAudioPort } from './audio-credential';
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
