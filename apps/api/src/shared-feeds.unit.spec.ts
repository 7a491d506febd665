import { Observable, Subject } from 'rxjs';
import { SharedFeeds } from './shared-feeds';

/** A source that counts its subscriptions and lets the test push values and end it. */
function source() {
  const values = new Subject<number>();
  const state = { subscriptions: 0, live: 0 };
  const make = () =>
    new Observable<number>((sub) => {
      state.subscriptions++;
      state.live++;
      const s = values.subscribe(sub);
      return () => {
        state.live--;
        s.unsubscribe();
      };
    });
  return { values, state, make };
}

describe('SharedFeeds', () => {
  it('one upstream subscription for every follower of a key; a late follower gets the latest value at once', () => {
    const feeds = new SharedFeeds();
    const src = source();
    const a: number[] = [];
    const b: number[] = [];
    const sa = feeds.of('run-1', src.make).subscribe((v) => a.push(v));
    src.values.next(1);
    const sb = feeds.of('run-1', src.make).subscribe((v) => b.push(v));
    src.values.next(2);
    expect(src.state.subscriptions).toBe(1);
    expect(a).toEqual([1, 2]);
    expect(b).toEqual([1, 2]);
    sa.unsubscribe();
    expect(src.state.live).toBe(1);
    sb.unsubscribe();
    // the last follower left: the poll stops and the feed is forgotten
    expect(src.state.live).toBe(0);
    expect(feeds.size).toBe(0);
    const c: number[] = [];
    feeds.of('run-1', src.make).subscribe((v) => c.push(v));
    expect(src.state.subscriptions).toBe(2);
    src.values.next(3);
    expect(c).toEqual([3]);
  });

  it('keys are apart, and a feed that ends is forgotten (the next follower starts a new one)', () => {
    const feeds = new SharedFeeds();
    const one = source();
    const two = source();
    let ended = false;
    feeds.of('run-1', one.make).subscribe({ complete: () => (ended = true) });
    feeds.of('run-2', two.make).subscribe();
    expect([one.state.subscriptions, two.state.subscriptions, feeds.size]).toEqual([1, 1, 2]);
    one.values.complete();
    expect(ended).toBe(true);
    expect(feeds.size).toBe(1);
    feeds.of('run-1', one.make).subscribe();
    expect(one.state.subscriptions).toBe(2);
  });
});
