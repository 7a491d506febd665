import { AssayError, errorFactory, EXIT_CODES, type ErrorTable } from './errors';

describe('errorFactory: one table per lib', () => {
  const TABLE = { DEMO_BAD: 'invalid_input', DEMO_GONE: 'not_found' } as const satisfies ErrorTable;
  const demoError = errorFactory(TABLE);

  it("builds the code's error with the kind its table gives, details and cause", () => {
    const cause = new Error('underneath');
    const e = demoError('DEMO_GONE', 'no such thing', { id: 'x' }, cause);
    expect(e).toBeInstanceOf(AssayError);
    expect(e.toJSON()).toEqual({ code: 'DEMO_GONE', kind: 'not_found', message: 'no such thing', details: { id: 'x' } });
    expect(e.cause).toBe(cause);
    expect(EXIT_CODES[e.kind]).toBe(3);
    expect(demoError('DEMO_BAD', 'bad').details).toEqual({});
  });

  it('refuses a code outside the table (a typo that escaped the type checker) as an internal error', () => {
    expect(() => (demoError as (c: string, m: string) => AssayError)('DEMO_TYPO', 'x')).toThrow(
      expect.objectContaining({ code: 'INTERNAL_UNKNOWN_ERROR_CODE', kind: 'internal' }),
    );
  });
});
