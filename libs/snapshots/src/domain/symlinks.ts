/**
 * Where a symlink points, decided from the snapshot alone (nothing on disk is followed): the target is resolved
 * lexically against the link's directory, expanding every symlink recorded in the same snapshot that the path
 * goes through (as the kernel would, `..` after a link is taken from the link's target). A link is `outside` if
 * its target is absolute, climbs above the root, or needs more than MAX_LINK_HOPS expansions; else `inside`
 * (a dangling target inside the root is `inside`).
 */
export const MAX_LINK_HOPS = 40;

export type LinkClass = 'inside' | 'outside';

export function classifySymlink(rel: string, links: ReadonlyMap<string, string>): LinkClass {
  const first = links.get(rel);
  if (first === undefined) return 'inside';
  const stack = rel.split('/');
  stack.pop();
  if (first.startsWith('/')) return 'outside';
  let queue = first.split('/');
  let hops = 0;
  while (queue.length > 0) {
    const c = queue.shift() as string;
    if (c === '' || c === '.') continue;
    if (c === '..') {
      if (stack.length === 0) return 'outside';
      stack.pop();
      continue;
    }
    stack.push(c);
    const t = links.get(stack.join('/'));
    if (t !== undefined) {
      hops += 1;
      if (hops > MAX_LINK_HOPS || t.startsWith('/')) return 'outside';
      stack.pop();
      queue = [...t.split('/'), ...queue];
    }
  }
  return 'inside';
}

/** The links that point outside, in path order. */
export function outsideSymlinks(links: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const rel of links.keys()) if (classifySymlink(rel, links) === 'outside') out.push(rel);
  return out.sort();
}
