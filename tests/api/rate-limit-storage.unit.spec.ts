import { SlidingWindowRateLimitStorage } from '../../apps/api/src/rate-limit-storage';

describe('SlidingWindowRateLimitStorage', () => {
  const minute = 60_000;
  const clock = (start = 1_000_000) => {
    const c = { t: start, now: () => c.t };
    return c;
  };

  it('lets `limit` hits through, blocks the next one for the block duration, then counts from zero again', async () => {
    const c = clock();
    const s = new SlidingWindowRateLimitStorage(c.now);
    for (let i = 1; i <= 3; i++)
      expect(await s.increment('a', minute, 3, minute, 'default')).toEqual({ totalHits: i, timeToExpire: 60, isBlocked: false, timeToBlockExpire: 0 });
    expect(await s.increment('a', minute, 3, minute, 'default')).toMatchObject({ isBlocked: true, timeToBlockExpire: 60 });
    c.t += 30_000;
    // Still blocked, and a blocked request is not counted.
    expect(await s.increment('a', minute, 3, minute, 'default')).toMatchObject({ isBlocked: true, timeToBlockExpire: 30 });
    // Another key (address and route) is counted on its own.
    expect(await s.increment('b', minute, 3, minute, 'default')).toMatchObject({ totalHits: 1, isBlocked: false });
    c.t += 30_000;
    expect(await s.increment('a', minute, 3, minute, 'default')).toEqual({ totalHits: 1, timeToExpire: 60, isBlocked: false, timeToBlockExpire: 0 });
  });

  it('counts the share of the previous window still inside the last ttl (a sliding window, not a reset at each boundary)', async () => {
    const c = clock();
    const s = new SlidingWindowRateLimitStorage(c.now);
    for (let i = 0; i < 10; i++) await s.increment('a', minute, 10, minute, 'default');
    // A quarter into the next window three quarters of the previous window's 10 hits still count: 7, then 1 more.
    c.t += minute + 15_000;
    expect(await s.increment('a', minute, 10, minute, 'default')).toMatchObject({ totalHits: 8, isBlocked: false, timeToExpire: 45 });
    expect(await s.increment('a', minute, 10, minute, 'default')).toMatchObject({ totalHits: 9 });
    expect(await s.increment('a', minute, 10, minute, 'default')).toMatchObject({ totalHits: 10, isBlocked: false });
    expect(await s.increment('a', minute, 10, minute, 'default')).toMatchObject({ isBlocked: true });
    // Two windows later nothing of the old hits is left.
    const t = clock(c.t);
    const fresh = new SlidingWindowRateLimitStorage(t.now);
    await fresh.increment('x', minute, 10, minute, 'default');
    t.t += 2 * minute;
    expect(await fresh.increment('x', minute, 10, minute, 'default')).toMatchObject({ totalHits: 1 });
  });

  it('keeps a bounded state however many hits a key takes, and drops idle keys after two windows', async () => {
    const c = clock();
    const s = new SlidingWindowRateLimitStorage(c.now);
    for (let i = 0; i < 200_000; i++) await s.increment('busy', minute, 1_000_000, minute, 'default');
    expect(await s.increment('busy', minute, 1_000_000, minute, 'default')).toMatchObject({ totalHits: 200_001, isBlocked: false });
    for (let i = 0; i < 1000; i++) await s.increment(`addr-${i}`, minute, 10, minute, 'default');
    expect(s.size).toBe(1001);
    c.t += 2 * minute;
    await s.increment('late', minute, 10, minute, 'default');
    expect(s.size).toBe(1);
  });

  it('keeps named throttlers apart for the same key', async () => {
    const s = new SlidingWindowRateLimitStorage(clock().now);
    await s.increment('a', minute, 1, minute, 'short');
    expect(await s.increment('a', minute, 1, minute, 'long')).toMatchObject({ totalHits: 1, isBlocked: false });
    expect(await s.increment('a', minute, 1, minute, 'short')).toMatchObject({ isBlocked: true });
  });
});
