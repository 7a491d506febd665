/**
 * `assay task init DIR [--from-template T]`: writes a new task from a template (domain/templates.ts) into DIR, which
 * must be absent or empty. Files are created exclusively (`wx`), so nothing that appears meanwhile is overwritten.
 */
import * as fs from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { AssayError, makeDirectories } from '@assay/core';
import { TASK_ERROR_CODES } from '../task-format.errors';
import { taskNameFor, templateFiles, type TaskTemplate } from '../domain/templates';

export interface ScaffoldResult {
  readonly dir: string;
  readonly name: string;
  readonly template: TaskTemplate;
  readonly files: readonly string[];
}

export function scaffoldTask(dir: string, template: TaskTemplate, o: { name?: string } = {}): ScaffoldResult {
  const abs = resolve(dir);
  let st: fs.Stats | null = null;
  try {
    st = fs.lstatSync(abs);
  } catch {
    st = null;
  }
  if (st !== null) {
    if (!st.isDirectory()) throw new AssayError(TASK_ERROR_CODES.DIR_NOT_EMPTY, 'conflict', `${dir}: exists and is not a directory`, { details: { dir: abs } });
    if (fs.readdirSync(abs).length > 0)
      throw new AssayError(TASK_ERROR_CODES.DIR_NOT_EMPTY, 'conflict', `${dir}: not empty; task init writes only into a new or empty directory`, {
        details: { dir: abs },
      });
  }
  const name = o.name ?? taskNameFor(basename(abs));
  const files = templateFiles(template, name);
  makeDirectories(abs);
  for (const f of files) {
    const target = join(abs, ...f.path.split('/'));
    makeDirectories(dirname(target));
    fs.writeFileSync(target, f.content, { flag: 'wx', mode: f.mode });
    fs.chmodSync(target, f.mode);
  }
  return { dir: abs, name, template, files: files.map((f) => f.path) };
}
