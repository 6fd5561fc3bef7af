import type { Socket } from 'node:net';

/** What the reference desktop's audio bridges answer once the credential is right (credential.sh in the image). */
const ACCEPTED = Buffer.from('OK\n', 'latin1');
/** The bridges read at most 255 characters of credential; a longer or multi-line secret could never be accepted. */
const CREDENTIAL = /^[\x21-\x7e]{1,255}$/;

export class AudioCredentialError extends Error {}

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
    const onClose = () => finish(new AudioCredentialError('the audio port closed the connection without accepting the workspace\'s credential'));
    const onError = (err: Error) => finish(new AudioCredentialError(`the audio port failed: ${err.message}`));
    const timer = setTimeout(() => finish(new AudioCredentialError('the audio port did not acknowledge the workspace\'s credential in time')), timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('error', onError);
    socket.write(`${secret}\n`);
  });
}
