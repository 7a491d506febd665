/**
 * YAML for environment/docker-compose.yaml, through js-yaml 4 with the YAML 1.2 core schema (no timestamps, no merge
 * keys, no custom tags; duplicate keys are errors). js-yaml is pure JavaScript and does no I/O.
 */
import { problem, TASK_ERROR_CODES as C, type TaskProblem } from '../task-format.errors';

interface JsYaml {
  load(text: string, options?: { schema?: unknown; json?: boolean; filename?: string }): unknown;
  CORE_SCHEMA: unknown;
}

// js-yaml ships no type declarations; this is the whole surface used. Loaded on the first compose file, so that
// tasks without one (and every command's start-up) do not pay for it.
let jsYamlModule: JsYaml | undefined;
const jsYaml = (): JsYaml => (jsYamlModule ??= require('js-yaml') as JsYaml);

export type YamlParse = { ok: true; value: unknown } | { ok: false; problem: TaskProblem };

export function parseYamlText(text: string, file: string): YamlParse {
  try {
    return { ok: true, value: jsYaml().load(text, { schema: jsYaml().CORE_SCHEMA, json: false, filename: file }) };
  } catch (e) {
    const first = (e instanceof Error ? e.message : String(e)).split('\n')[0] ?? 'parse error';
    return { ok: false, problem: problem(C.YAML_SYNTAX, file, null, `not valid YAML: ${first}`) };
  }
}
