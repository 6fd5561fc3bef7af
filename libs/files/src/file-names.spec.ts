import { ApiError } from '@ws/common';
import { attachmentDisposition, checkFileName, isTransferableName } from './file-names';

describe('checkFileName', () => {
  it.each(['report.pdf', '.bashrc', 'a b (1).tar.gz', 'Grüße 報告.txt', '..hidden', 'x'.repeat(255), 'é'.repeat(127)])('accepts %j', (name) => {
    expect(checkFileName(name)).toBe(name);
  });

  it.each([
    ['', /Name the file/], ['.', /not allowed/], ['..', /not allowed/], ['a/b', /must not contain/], ['../x', /must not contain/], ['a\\b', /must not contain/],
    ['line\nbreak', /control/], ['nul\u0000', /control/], ['del\u007f', /control/], ['c1\u0085', /control/], ['   ', /blank/], ['y ', /start or end/], [' y', /start or end/], ['y\u00a0', /start or end/],
    ['x'.repeat(256), /255 bytes/], ['é'.repeat(128), /255 bytes/], ['half\ud800', /valid Unicode/], [42, /Name the file/], [undefined, /Name the file/],
  ])('refuses %j with a 400', (name, message) => {
    let caught: unknown;
    try {
      checkFileName(name);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ApiError);
    expect((caught as ApiError).code).toBe('invalid_request');
    expect((caught as ApiError).message).toMatch(message);
    if (typeof name === 'string') expect(isTransferableName(name)).toBe(false);
  });
});

describe('attachmentDisposition', () => {
  it('gives an ASCII fallback and the exact UTF-8 name', () => {
    expect(attachmentDisposition('big file.bin')).toBe(`attachment; filename="big file.bin"; filename*=UTF-8''big%20file.bin`);
    expect(attachmentDisposition('Grüße "q".txt')).toBe(`attachment; filename="Gr__e _q_.txt"; filename*=UTF-8''Gr%C3%BC%C3%9Fe%20%22q%22.txt`);
    expect(attachmentDisposition("it's (1).txt")).toBe(`attachment; filename="it's (1).txt"; filename*=UTF-8''it%27s%20%281%29.txt`);
  });
});
