import { portMapResponse } from './workspace.mappers';

const ID = '0b7e3f5c-2a4d-4c1e-9f00-123456789abc';
const path = (name: string) => `api/stream/0b7e3f5c2a4d4c1e9f00123456789abc/${name}`;

describe('portMapResponse', () => {
  it('gives every container workspace uploads (port 0: the route is the api), beside the image ports', () => {
    expect(portMapResponse({ id: ID, serverConnection: null, image: { kind: 'container' } }, { vnc: '5900/tcp', audio: '4901/tcp', audio_input: '4902/tcp' })).toEqual({
      vnc: { port: 5900, path: path('vnc') }, audio: { port: 4901, path: path('audio') }, audio_input: { port: 4902, path: path('audio_input') },
      uploads: { port: 0, path: path('uploads') },
    });
  });

  it("keeps an image's own uploads port", () => {
    expect(portMapResponse({ id: ID, serverConnection: null, image: { kind: 'container' } }, { vnc: '5900/tcp', uploads: '4903/tcp' }).uploads).toEqual({ port: 4903, path: path('uploads') });
  });

  it('gives server sessions no uploads (files move only to and from containers)', () => {
    expect(Object.keys(portMapResponse({ id: ID, serverConnection: null, image: { kind: 'server' } }, { vnc: '5900/tcp' }))).toEqual(['vnc']);
    const connection = { protocol: 'vnc', host: '10.0.0.5', port: 5900, mode: 'direct' } as never;
    expect(Object.keys(portMapResponse({ id: ID, serverConnection: connection, image: { kind: 'container' } }, { vnc: '5900/tcp' }))).toEqual(['vnc']);
  });
});
