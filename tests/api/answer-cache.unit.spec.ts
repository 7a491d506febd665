import { AnswerCache, ifNoneMatchNames } from '../../apps/api/src/answer-cache';

describe('AnswerCache', () => {
  it('keeps an answer per key and version, remakes it when the version moves, and never keeps a missing one', async () => {
    const c = new AnswerCache();
    let made = 0;
    const make = async () => ({ n: ++made });
    const a = await c.get('k', 'v1', make);
    expect(await c.get('k', 'v1', make)).toBe(a);
    expect(made).toBe(1);
    expect((await c.get('k', 'v2', make))!.bytes.toString('utf8')).toBe('{"n":2}');
    expect(await c.get('none', 'v2', async () => null)).toBeNull();
    expect((await c.get('none', 'v2', async () => ({ now: 'here' })))!.bytes.toString('utf8')).toBe('{"now":"here"}');
  });

  it('evicts the least recently used past its entry and byte bounds, and keeps no answer over a quarter of them', async () => {
    const c = new AnswerCache(2, 1000);
    let made = 0;
    const make = (v: string) => async () => {
      made++;
      return v;
    };
    await c.get('a', 'v', make('a'));
    await c.get('b', 'v', make('b'));
    await c.get('a', 'v', make('a')); // a is now the most recent
    await c.get('c', 'v', make('c')); // b goes
    const before = made;
    await c.get('a', 'v', make('a'));
    expect(made).toBe(before);
    await c.get('b', 'v', make('b'));
    expect(made).toBe(before + 1);
    await c.get('big', 'v', make('x'.repeat(400)));
    await c.get('big', 'v', make('x'.repeat(400)));
    expect(made).toBe(before + 3); // too big to keep: made each time
  });
});

describe('ifNoneMatchNames', () => {
  it('matches a listed, weak or wildcard entity tag, and nothing else', () => {
    const etag = '"abc"';
    expect(ifNoneMatchNames(undefined, etag)).toBe(false);
    expect(ifNoneMatchNames('"abc"', etag)).toBe(true);
    expect(ifNoneMatchNames('W/"abc"', etag)).toBe(true);
    expect(ifNoneMatchNames('"x", "abc"', etag)).toBe(true);
    expect(ifNoneMatchNames(['"x"', '"abc"'], etag)).toBe(true);
    expect(ifNoneMatchNames('*', etag)).toBe(true);
    expect(ifNoneMatchNames('"abcd"', etag)).toBe(false);
    expect(ifNoneMatchNames('abc', etag)).toBe(false);
    expect(ifNoneMatchNames('', etag)).toBe(false);
  });
});
