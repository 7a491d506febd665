/**
 * Server-sent event feeds shared by every connection that follows the same thing (the ledger's head, one run's
 * trajectory): one poll of the read models per interval, whatever the number of connections, instead of one per
 * connection. A connection that joins gets the latest value at once; when the last one leaves, or the feed ends
 * (the run ended), the poll stops and the feed is forgotten.
 */
import { finalize, shareReplay, type Observable } from 'rxjs';

export class SharedFeeds {
  private readonly feeds = new Map<string, Observable<unknown>>();

  /** Feeds running now (for tests and metrics). */
  get size(): number {
    return this.feeds.size;
  }

  /** The shared feed for `key`, made with `make` when there is none running. */
  of<T>(key: string, make: () => Observable<T>): Observable<T> {
    const running = this.feeds.get(key) as Observable<T> | undefined;
    if (running) return running;
    const feed: Observable<T> = make().pipe(
      finalize(() => {
        if (this.feeds.get(key) === feed) this.feeds.delete(key);
      }),
      shareReplay({ bufferSize: 1, refCount: true }),
    );
    this.feeds.set(key, feed);
    return feed;
  }
}
