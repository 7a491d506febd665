/**
 * Run directories private to the operator, and setuid/setgid bits cleared from the workspace (real file system).
 */
import { chmodSync, chownSync, lstatSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensurePrivateDir, stripSetIdBits } from './work-containment';

const root = (process.getuid?.() ?? 0) === 0;
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'assay-private-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('ensurePrivateDir', () => {
  it('makes a group/other-accessible directory private (0700) and says so; a private one is left alone', () => {
    const home = join(dir, 'home');
    mkdirSync(home);
    chmodSync(home, 0o751);
    const lines: string[] = [];
    ensurePrivateDir(home, 'ASSAY_HOME', (l) => lines.push(l));
    expect(statSync(home).mode & 0o777).toBe(0o700);
    expect(lines).toEqual([`ASSAY_HOME ${home} was accessible to its group and other users (mode 0751); made it private (0700)`]);
    ensurePrivateDir(home, 'ASSAY_HOME', (l) => lines.push(l));
    expect(lines).toHaveLength(1);
  });

  it('creates a missing directory 0700', () => {
    const runs = join(dir, 'runs');
    ensurePrivateDir(runs, 'the runs directory', () => undefined);
    expect(statSync(runs).mode & 0o777).toBe(0o700);
  });

  (root ? it : it.skip)('refuses a directory owned by another user (RUN_HOME_UNSAFE)', () => {
    const other = join(dir, 'other');
    mkdirSync(other, { mode: 0o700 });
    chownSync(other, 4321, 4321);
    expect(() => ensurePrivateDir(other, 'ASSAY_HOME', () => undefined)).toThrow(expect.objectContaining({ code: 'RUN_HOME_UNSAFE' }));
  });
});

describe('stripSetIdBits', () => {
  it('clears setuid and setgid bits of files and directories, keeps the rest, never follows symlinks', () => {
    const outside = join(dir, 'outside');
    writeFileSync(outside, '');
    chmodSync(outside, 0o6755);
    const ws = join(dir, 'ws');
    mkdirSync(join(ws, 'd'), { recursive: true });
    writeFileSync(join(ws, 'd', 'shell'), '#!/bin/sh\n');
    chmodSync(join(ws, 'd', 'shell'), 0o6755);
    chmodSync(join(ws, 'd'), 0o2775);
    writeFileSync(join(ws, 'plain'), '');
    chmodSync(join(ws, 'plain'), 0o1644);
    symlinkSync(outside, join(ws, 'link'));
    expect(stripSetIdBits(ws).sort()).toEqual(['d', 'd/shell']);
    expect(lstatSync(join(ws, 'd', 'shell')).mode & 0o7777).toBe(0o755);
    expect(lstatSync(join(ws, 'd')).mode & 0o7777).toBe(0o775);
    expect(lstatSync(join(ws, 'plain')).mode & 0o7777).toBe(0o1644);
    expect(lstatSync(outside).mode & 0o7777).toBe(0o6755); // not followed
  });
});
