/** JSON values as a task's metadata and parsed TOML/YAML carry them (their own module: values.ts and task-plan.ts both use them). */
export type JsonValue = string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };
export type JsonObject = { readonly [key: string]: JsonValue };
