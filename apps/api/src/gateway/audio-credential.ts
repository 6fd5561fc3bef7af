import type { Socket } from 'node:net';

/** What the reference desktop's audio bridges answer once the credential is right (credential.sh in the image). */
const ACCEPTED = Buffer.from('OK\n', 'latin1');
/** The bridges read at most 255 characters of credential; a longer or multi-line secret could never be accepted. */
const CREDENTIAL = /^[\x21-\x7e]{1,255}$/;

export class AudioCredentialError extends Error {
  /** `closed`: the port hung up (closed or reset) without a byte, as a bridge that refuses does, and as Docker's port proxy does while nothing listens in the container yet. */
  constructor(message: string, readonly kind: 'closed' | 'other' = 'other') {
    super(message);
  }
}

/**
 * Proves to a workspace's audio port (sound or microphone) that the gateway holds the workspace's credential, as
 * the VNC handshake does for the desktop: the ports are published like VNC's, so the bridges behind them take only
 * a client whose first line is the secret the container got as VNC_PASSWORD (the workspace's token). Sends
 * `<secret>\n`, then waits for `OK\n`; a bridge that refuses closes the connection without a byte. Answers what
 * arrived after the acknowledgement (the start of the Ogg stream), with the socket paused so that nothing more is
 * lost before the caller listens; the caller resumes it.
 */
export function authenticateToAudioPort(socket: Socket, secret: string, timeoutMs: number): Promise<Buffer> {
  // Never in a message: the secret is the workspace's VNC password.
  if (!CREDENTIAL.test(secret)) return Promise.reject(new AudioCredentialError('the workspace has no usable audio credential'));
  return new Promise((resolve, reject) => {
    let received = Buffer.alloc(0);
    const finish = (err: Error | null, rest?: Buffer) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.off('error', onError);
      if (err) reject(err);
      else resolve(rest ?? Buffer.alloc(0));
    };
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < ACCEPTED.length) {
        if (!ACCEPTED.subarray(0, received.length).equals(received)) finish(new AudioCredentialError('the audio port answered something other than the credential protocol'));
        return;
      }
      if (!received.subarray(0, ACCEPTED.length).equals(ACCEPTED)) return finish(new AudioCredentialError('the audio port answered something other than the credential protocol'));
      socket.pause();
      finish(null, received.subarray(ACCEPTED.length));
    };
    const onClose = () => finish(new AudioCredentialError('the audio port closed the connection without accepting the workspace\'s credential', 'closed'));
    // Reset before a byte: hung up on, as by a refusing bridge or a port proxy with nothing behind it.
    const onError = (err: NodeJS.ErrnoException) =>
      finish(new AudioCredentialError(`the audio port failed: ${err.message}`, received.length === 0 && (err.code === 'ECONNRESET' || err.code === 'EPIPE') ? 'closed' : 'other'));
    const timer = setTimeout(() => finish(new AudioCredentialError('the audio port did not acknowledge the workspace\'s credential in time')), timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('error', onError);
    socket.write(`${secret}\n`);
  });
}

/**
 * Connects (`connect`) and authenticates to an audio port, trying again every `retryMs` for up to `waitMs` while the
 * port is not listening yet: refused, or hung up on (closed or reset) without a byte (Docker's port proxy accepts for
 * the container and then hangs up while nothing listens inside). Any other failure, or the bound, ends it. Answers the socket,
 * paused, and what arrived after the acknowledgement.
 */
export async function openAudioPort(
  connect: () => Promise<Socket>,
  secret: string,
  options: { credentialTimeoutMs: number; waitMs: number; retryMs: number },
): Promise<{ socket: Socket; firstBytes: Buffer }> {
  const deadline = Date.now() + options.waitMs;
  const attempts = Math.max(1, Math.ceil(options.waitMs / options.retryMs));
  for (let attempt = 1; ; attempt++) {
    let socket: Socket | null = null;
    try {
      socket = await connect();
      // Failures surface as 'close' (the handshake's, then the bridge's); an unheard 'error' would throw.
      socket.on('error', () => undefined);
      return { socket, firstBytes: await authenticateToAudioPort(socket, secret, options.credentialTimeoutMs) };
    } catch (err) {
      socket?.destroy();
      // Refused, or reset before the connection was even up, or hung up on without a byte.
      const notListening = (err instanceof AudioCredentialError && err.kind === 'closed') || ['ECONNREFUSED', 'ECONNRESET'].includes((err as NodeJS.ErrnoException).code ?? '');
      if (!notListening || attempt >= attempts || Date.now() + options.retryMs > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, options.retryMs));
    }
  }
}
