import { isAssayError } from '@assay/core';

/** The code and message of the AssayError a promise rejects with; fails when it resolves or rejects otherwise. */
export async function failure(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (e) {
    if (!isAssayError(e)) throw e;
    return { code: e.code, message: e.message };
  }
  throw new Error('expected a failure');
}

/** The code of the AssayError a synchronous call throws; undefined when it returns; a marker when it throws otherwise. */
export function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return isAssayError(e) ? e.code : `not an AssayError: ${String(e)}`;
  }
  return undefined;
}
