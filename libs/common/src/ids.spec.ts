import { parseId, toWireId } from './ids';
import { formatTimestamp } from './timestamps';

describe('ids', () => {
  it('accepts 32-hex and dashed layouts and returns the dashed form', () => {
    const dashed = '0f8fad5b-d9cb-469f-a165-70867728950e';
    expect(parseId(dashed)).toBe(dashed);
    expect(parseId('0F8FAD5BD9CB469FA16570867728950E')).toBe(dashed);
    expect(toWireId(dashed)).toBe('0f8fad5bd9cb469fa16570867728950e');
  });
  it.each([['nope'], [''], [42], [null], ['0f8fad5bd9cb469fa16570867728950']])('rejects %p', (v) => {
    expect(parseId(v)).toBeNull();
  });
});

describe('formatTimestamp', () => {
  it('prints UTC with microseconds', () => {
    expect(formatTimestamp(new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 67)))).toBe('2026-01-02 03:04:05.067000');
    expect(formatTimestamp(null)).toBeNull();
  });
});
